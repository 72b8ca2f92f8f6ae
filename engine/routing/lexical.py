"""The lexical evidence channel: identifier-aware tokens and BM25 over the routed nodes.

Tokens (``tokenize``): lower-cased words, lightly stemmed (Snowball English, PyStemmer), English
stop words dropped; identifiers (``\\pretocmd``, ``set_wire_rc``, ``--prefix``, ``CONFIG_FOO``,
``camelCase``, ``x86_64``) are kept whole (unstemmed, with their backslash or dashes) AND split
into their parts, so "patch a command" and "\\patchcmd" meet on ``patchcmd``... only when
written so; the parts make ``set_wire_rc`` match "set wire rc".
Scoring (``LexicalIndex``): bm25s (Lucene BM25, k1 = 1.2, b = 0.75) over pre-tokenised rows.
"""
from __future__ import annotations

import re
from functools import lru_cache

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

VERSION = "1"  # bump when tokens change: stored evidence is then re-indexed
TITLE_BOOST = 2
_STOP = frozenset(STOPWORDS_EN)
# An identifier-ish run: optional leading backslash or dashes, then word characters joined by
# _ . - : (kept whole) ; or a plain word.
_TOKEN = re.compile(r"(?:\\|--?)?[A-Za-z0-9]+(?:[_.:\-][A-Za-z0-9]+)*")
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_stemmer = Stemmer.Stemmer("english")


@lru_cache(maxsize=200_000)
def _analyse(raw: str) -> tuple[str, ...]:
    low = raw.lower()
    parts = [p.lower() for p in _PARTS.findall(raw)]
    plain = raw.isalpha() or (raw.isalnum() and not any(c.isupper() for c in raw[1:]))
    if plain and len(parts) <= 1:
        if low in _STOP:
            return ()
        return (_stemmer.stemWord(low),)
    out = [low]
    for p in parts:
        if p not in _STOP and p != low:
            out.append(_stemmer.stemWord(p))
    return tuple(out)


def tokenize(text: str) -> list[str]:
    out: list[str] = []
    for m in _TOKEN.finditer(text or ""):
        out.extend(_analyse(m.group()))
    return out


def evidence_tokens(heading_path: list[str], text: str, title_boost: int = TITLE_BOOST) -> list[str]:
    toks: list[str] = []
    for title in heading_path:
        toks.extend(tokenize(title))
    if heading_path:
        toks.extend(tokenize(heading_path[-1]) * (title_boost - 1))
    toks.extend(tokenize(text))
    return toks


class LexicalIndex:
    def __init__(self, rows: list[list[str]]):
        self.n = len(rows)
        vocab: dict[str, int] = {}
        ids = [[vocab.setdefault(t, len(vocab)) for t in row] for row in rows]
        self.vocab = vocab
        self.model = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        if vocab:
            self.model.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=False)

    def scores(self, query_tokens: list[str]) -> np.ndarray:
        if not self.vocab:
            return np.zeros(self.n, dtype=np.float32)
        known = [t for t in dict.fromkeys(query_tokens) if t in self.vocab]
        if not known:
            return np.zeros(self.n, dtype=np.float32)
        return np.asarray(self.model.get_scores(known), dtype=np.float32)
