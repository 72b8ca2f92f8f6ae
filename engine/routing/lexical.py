"""The lexical evidence channel: identifier-aware tokens and BM25 over the routed nodes.

Tokens (``tokenize``), for technical manuals:
- a run of word characters, optionally led by a backslash, one or two dashes or a dot, and
  joined by ``. : @ -`` (at most two in a row), is one raw token: ``\\pretocmd``,
  ``set_wire_rc``, ``--prefix``, ``-Wall``, ``.option`` (SPICE), ``foo.bar`` (of
  ``foo.bar()``), ``x86_64``, ``\\protected@xappto``;
- a plain word (letters only, lower, Title or UPPER case) is lower-cased, dropped if it is an
  English stop word (bm25s' NLTK list ``STOPWORDS_EN_PLUS``, which also drops question words
  such as "how" and "what"), else stemmed (Snowball English, PyStemmer): "patching", "patches"
  and "patch" all give ``patch``; numbers are kept as they are;
- any other raw token is an identifier: kept whole, lower-cased and unstemmed, with its
  backslash, dashes or dot (``\\pretocmd``, ``--prefix``, ``config_foo``), AND split into
  its parts at separators and camelCase humps (``set wire rc``, ``camel case name``,
  ``x86 64``; a humped run between separators also counts whole: ``e-TeX`` gives ``tex``),
  the parts treated like plain words (stop words dropped, stemmed), and its run-together words
  (``engine.routing.identifiers``: ``\\patchcmd`` also gives ``patch``, ``cmd``, ``command``;
  a lower-case word of ``RUN_TOGETHER`` letters or more too: ``allowframebreaks``). A question
  that writes the identifier matches the whole form; one that spells out its words matches the
  parts.
Analyses are cached per raw token, so a manual's repeated vocabulary is stemmed once.

Evidence (``evidence_tokens``): the heading path, then the body; the node's own title counts
``TITLE_BOOST`` (2) times in total. A title names what a section is about in a few words, so it
deserves more weight than one body mention, and BM25's saturation (k1) keeps a doubled term from
dominating; ancestors' titles count once, so a deep node still carries its chapter's words.

Scoring (``LexicalIndex``): bm25s over pre-tokenised rows (a string -> id vocabulary passed as
``bm25s.tokenization.Tokenized``; the index build is vectorised, see ``_BM25``), Lucene BM25
with k1 = 1.2 and b = 0.75 (Lucene's and Elasticsearch's defaults; Lucene's idf is never
negative, so a row sharing no term scores 0).
Rows with no tokens (the root, tables of contents, indexes) are left out of the index, so they
affect neither the document frequencies nor the average length, and score 0. Query terms count
once each (a question that repeats a word does not double its weight).
"""
from __future__ import annotations

import re
from functools import lru_cache
from itertools import chain
from typing import NamedTuple, Sequence

import bm25s
import bm25s.scoring as bm25s_scoring
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN_PLUS
from bm25s.tokenization import Tokenized

from engine.routing.identifiers import split_words

VERSION = "3"  # bump when tokens change: stored evidence is then re-indexed
RUN_TOGETHER = 8  # a lower-case word this long may be a run-together name (``identifiers``)
TITLE_BOOST = 2
K1 = 1.2
B = 0.75
METHOD = "lucene"

STOP_WORDS = frozenset(w for w in STOPWORDS_EN_PLUS if "'" not in w)
# Raw tokens: optional "\" or "-"/"--" or a leading "." (before a letter; the dot not after a
# word or another dot: SPICE ".tran", ".option"), a word run, then runs joined by at most two of
# . : @ - ("std::vector", "a.b", "e-TeX", "\protected@xappto").
_RAW = re.compile(r"(?:\\|--?(?=[^\W\d_])|(?<![\w.])\.(?=[^\W\d_]))?\w+(?:[.:@-]{1,2}\w+)*")
_ALNUM_RUN = re.compile(r"[^\W_]+")
# camelCase humps: "HTTPServer" -> HTTP Server, "camelCaseName" -> camel Case Name, "x86" stays.
_HUMP = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[^\W_A-Z]+|[A-Z]+")
_stemmer = Stemmer.Stemmer("english")


def tokenize(text: str) -> list[str]:
    """Index/query tokens of a text (rules in the module docstring)."""
    out: list[str] = []
    for raw in _RAW.findall(text or ""):
        out.extend(_analyse(raw))
    return out


def evidence_tokens(heading_path: Sequence[str], text: str,
                    title_boost: int = TITLE_BOOST) -> list[str]:
    """Tokens of a node's evidence: its heading path (ancestors' titles, then its own) and its
    body text; the own title's tokens appear ``title_boost`` times in total."""
    if title_boost < 0:
        raise ValueError("title_boost must be >= 0")
    toks: list[str] = []
    for title in heading_path[:-1]:
        toks.extend(tokenize(title))
    if heading_path:
        toks.extend(tokenize(heading_path[-1]) * title_boost)
    toks.extend(tokenize(text))
    return toks


class LexicalIndex:
    """BM25 (bm25s, Lucene variant, k1 = 1.2, b = 0.75) over one token list per row."""

    def __init__(self, rows: Sequence[Sequence[str]]):
        self.n = len(rows)
        kept = [i for i, row in enumerate(rows) if row]
        vocab = {t: i for i, t in enumerate(dict.fromkeys(chain.from_iterable(rows)))}
        self.vocab = vocab
        self._rows = np.asarray(kept, dtype=np.int64)
        self._bm25 = None
        if vocab:
            lengths = np.fromiter((len(rows[i]) for i in kept), dtype=np.int64, count=len(kept))
            flat = np.fromiter(map(vocab.__getitem__, chain.from_iterable(rows)),
                               dtype=np.int64, count=int(lengths.sum()))
            self._bm25 = _BM25(k1=K1, b=B, method=METHOD, backend="numpy")
            self._bm25.index(Tokenized(ids=_FlatIds(flat, lengths), vocab=vocab),
                             create_empty_token=False, show_progress=False)

    def __len__(self) -> int:
        return self.n

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """[n_rows] float32 BM25 score of every row; unknown terms ignored, 0 without a match."""
        out = np.zeros(self.n, dtype=np.float32)
        if self._bm25 is None:
            return out
        ids = list(dict.fromkeys(self.vocab[t] for t in query_tokens if t in self.vocab))
        if ids:
            out[self._rows] = self._bm25.get_scores_from_ids(ids)
        return out


class _FlatIds(NamedTuple):
    """A corpus of token ids as one flat array and the row lengths (no per-row Python lists)."""
    flat: np.ndarray
    lengths: np.ndarray


class _BM25(bm25s.BM25):
    """``bm25s.BM25`` with a vectorised ``build_index_from_ids`` (the extension point bm25s
    documents). bm25s counts terms row by row in Python; this counts them all at once (one
    ``np.unique``; the two timed in docs/results.md, "Routing cost"). The BM25
    formulas stay bm25s' own (its idf and tf scorers for the chosen method); a test checks the
    scores equal those of stock bm25s."""

    def build_index_from_ids(self, unique_token_ids, corpus_token_ids, show_progress=True,
                             leave_progress=False):
        if (not isinstance(corpus_token_ids, _FlatIds)
                or self.method in self.methods_requiring_nonoccurrence):
            return super().build_index_from_ids(unique_token_ids, corpus_token_ids,
                                                show_progress, leave_progress)
        flat, lengths = corpus_token_ids
        n_docs, n_vocab = len(lengths), len(unique_token_ids)
        docs = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
        # (term, row) pairs sorted term-major: that is already the CSC order bm25s scores from
        pairs, tf = np.unique(flat * n_docs + docs, return_counts=True)
        terms, rows = np.divmod(pairs, n_docs)
        df = np.bincount(terms, minlength=n_vocab)
        idf = bm25s_scoring._build_idf_array(
            dict(enumerate(df.tolist())), n_docs,
            bm25s_scoring._select_idf_scorer(self.idf_method), self.dtype)
        tfc = bm25s_scoring._select_tfc_scorer(self.method)(
            tf_array=tf.astype(self.dtype), l_d=lengths[rows], l_avg=lengths.mean(),
            k1=self.k1, b=self.b, delta=self.delta)
        self.nonoccurrence_array = None
        indptr = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        return {"data": (idf[terms] * tfc).astype(self.dtype),
                "indices": rows.astype(self.int_dtype), "indptr": indptr, "num_docs": n_docs}


@lru_cache(maxsize=1 << 18)
def _analyse(raw: str) -> tuple[str, ...]:
    if raw.isdigit():
        return (raw,)
    if raw.isalpha() and (raw.islower() or raw.isupper() or raw.istitle()):
        low = raw.lower()
        if len(low) < RUN_TOGETHER or not raw.islower():
            return _word(low)
        # a run-together name written as a word ("allowframebreaks"): its words too
        return tuple(dict.fromkeys(chain(_word(low), *(_word(w) for w in split_words(low)))))
    if not _ALNUM_RUN.search(raw):
        return ()  # underscores only
    whole = raw.lower()
    # a mixed-case stop word ("bY", "iF") is still a stop word. VERSION is not bumped for this:
    # only such odd spellings change, and a stored index holding one is merely a word heavier.
    out = [] if whole in STOP_WORDS else [whole]
    for run in _ALNUM_RUN.findall(raw):
        humps = _HUMP.findall(run)
        parts = humps if len(humps) == 1 or run.lower() == whole else [run, *humps]
        for part in parts:
            for tok in _word(part.lower()):
                if tok not in out:
                    out.append(tok)
    for word in split_words(raw):  # run-together parts ("patchcmd": patch cmd command)
        for tok in _word(word):
            if tok not in out:
                out.append(tok)
    return tuple(out)


def _word(low: str) -> tuple[str, ...]:
    if low in STOP_WORDS:
        return ()
    if low.isdigit():
        return (low,)
    return (_stemmer.stemWord(low),)
