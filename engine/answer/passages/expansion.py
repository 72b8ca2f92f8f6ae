"""Entry expansion (issue 66): words a person's question uses that an entry's own text lacks.

Two sources, both the manual's own, read at score time from what the library stores:

- **the back-of-book index** (``BackIndex``): the manual's index nodes (kind "index", marked by
  ``engine.document.hygiene``) map terms to printed pages ("history, sharing 45", "French clef
  . . . 17, 765"); a unit is given the terms that point at the page it begins on, and the
  linear score reads them with its heading path (the lexical field, ``sentences.score``);
- **the entry's kind in words** (``entry_kinds``, ``wanted_kinds``, ``kind_agreement``):
  what an entry is (an option, a command, a key or variable, an environment, a function, a
  statement), read from its signature's shape and its heading path's words, matched against
  the kinds the question names ("which option", "what command", "which variable").

An entry's name in words (``\\newbool`` -> "new bool", ``setTextColor`` -> "set text color")
is read already (``engine.routing.identifiers.as_words``, in ``sentences.Sentence.path``).

Hand-written cues over the manual's layout; no library reads a PDF's index into page terms.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from engine.answer.passages.passage_index import per_document
from engine.document.hygiene import _logical_lines

# -- the back-of-book index ----------------------------------------------------------------------

_PAGE = r"(?:[1-9]\d{0,3})"
_PAGES = rf"{_PAGE}(?:\s*[–—-]\s*{_PAGE})?(?:\s*,\s*{_PAGE}(?:\s*[–—-]\s*{_PAGE})?)*"
_ENTRY = re.compile(rf"^(?P<term>[^.·…]*?[^\s.,·…])\s?(?:[.·…]\s?){{3,}}\s?"
                    rf"(?P<pages>{_PAGES})$"
                    rf"|^(?P<term2>.*?[^\s\d.,·…]),?\s(?P<pages2>{_PAGES})$")
_RANGE = re.compile(rf"({_PAGE})(?:\s*[–—-]\s*({_PAGE}))?")
_LEADING_PAGES = re.compile(rf"^(?:{_PAGE}\s*[,–—-]?\s*)+(?=\D)")  # the line before's pages
MAX_TERM_WORDS = 8  # a longer "term" is a sentence that happens to end in a number
MAX_RANGE = 5  # a page range longer than this points at a chapter, not an entry
HEAD_WORDS = 4  # a line without pages this short is a head term for the lines under it


def index_entries(text: str) -> list[tuple[str, list[int]]]:
    """(term, printed page numbers) of an index text's lines; a short line without pages is a
    head term, prefixed to the entries right under it ("history" / "sharing, 45")."""
    out, head = [], ""
    for line in _logical_lines(text):
        m = _ENTRY.match(line)
        if m is None:
            head = line if len(line.split()) <= HEAD_WORDS and line[:1].isalpha() else ""
            continue
        term = _LEADING_PAGES.sub("", (m.group("term") or m.group("term2")).strip())
        if not term:
            continue
        if len(term.split()) > MAX_TERM_WORDS:
            continue
        pages = []
        for a, b in _RANGE.findall(m.group("pages") or m.group("pages2")):
            lo, hi = int(a), int(b or a)
            if lo <= hi <= lo + MAX_RANGE:
                pages.extend(range(lo, hi + 1))
        if head and term[:1].islower() and head.lower() not in term.lower():
            term = f"{head} {term}"
        out.append((term, pages))
    return out


class BackIndex:
    """A manual's back-of-book index as terms per physical page (``terms_on``)."""

    def __init__(self, by_page: dict[int, list[str]]):
        self.by_page = by_page

    @classmethod
    def build(cls, tree) -> "BackIndex":
        """From the tree's index nodes. Printed page numbers are mapped to physical pages by
        the PDF's page labels; without labels, by the offset (``OFFSETS``) under which most of
        the index's terms are found in the text of the sections on their pages
        (``page_offset``)."""
        physical: dict[int, int] = {}
        for i, label in enumerate(tree.page_labels):
            if label.isdigit():
                physical.setdefault(int(label), i + 1)
        entries = [e for node in tree.preorder() if node.kind == "index" and node.text
                   for e in index_entries(node.text)]
        offset = 0 if physical else page_offset(tree, entries)
        by_page: dict[int, list[str]] = defaultdict(list)
        for term, pages in entries:
            for p in pages:
                page = physical.get(p) if physical else p + offset
                if page is not None and term not in by_page[page]:
                    by_page[page].append(term)
        return cls(dict(by_page))

    def __len__(self) -> int:
        return sum(len(v) for v in self.by_page.values())

    def terms_on(self, page: int | None) -> str:
        """The index's terms that point at ``page``, "; "-joined ("" when none)."""
        return "; ".join(self.by_page.get(page, ())) if page is not None else ""


def terms_match(question, terms: list[str]):
    """The question's word match with each unit's index terms (BM25 over the candidates'
    terms, the lexical channel's tokens), divided by the best (0..1 within the question)."""
    import numpy as np

    from engine.routing import lexical

    rows = [lexical.tokenize(t) for t in terms]
    if not any(rows):
        return np.zeros(len(terms), dtype=np.float32)
    bm = lexical.LexicalIndex(rows).scores(list(question.tokens))
    best = float(bm.max()) if len(bm) else 0.0
    return bm / best if best > 0 else np.zeros(len(terms), dtype=np.float32)


OFFSETS = range(-60, 61)  # physical page - printed page, tried where the PDF gives no labels
SAMPLED = 300  # index entries read to find the offset


def page_offset(tree, entries: list[tuple[str, list[int]]]) -> int:
    """Physical minus printed page number: the offset in ``OFFSETS`` under which the most of
    (up to ``SAMPLED``) index terms occur in the text of the non-index sections on their page
    (0 on a tie with it)."""
    from engine.answer.passages.pages import _norm

    text_on: dict[int, list[str]] = defaultdict(list)
    for node in tree.preorder():
        if node.kind in ("index", "toc") or not node.text or node.page_start is None:
            continue
        for p in range(node.page_start, (node.page_end or node.page_start) + 1):
            text_on[p].append(node.text)
    pages = {p: _norm(" ".join(t)) for p, t in text_on.items()}
    step = max(1, len(entries) // SAMPLED)
    probes = [(_norm(t), ps) for t, ps in entries[::step] if len(_norm(t)) >= 4]
    hits = {off: sum(any(key in pages.get(p + off, "") for p in ps) for key, ps in probes)
            for off in OFFSETS}
    best = max(OFFSETS, key=lambda off: (hits[off], -abs(off)))
    return best if hits[best] > hits[0] else 0


# -- the entry's kind ---------------------------------------------------------------------------

# kind -> the nouns that name it (in a question, or in a heading path)
KIND_WORDS = {
    "option": ("option", "options", "flag", "flags", "switch", "switches"),
    "command": ("command", "commands", "macro", "macros", "builtin", "builtins"),
    "key": ("key", "keys", "setting", "settings", "variable", "variables", "parameter",
            "parameters", "property", "properties", "attribute", "attributes"),
    "environment": ("environment", "environments"),
    "function": ("function", "functions", "routine", "routines", "method", "methods"),
    "statement": ("statement", "statements", "directive", "directives", "keyword", "keywords"),
}
_NOUN = {w: k for k, words in KIND_WORDS.items() for w in words}
_WORD = re.compile(r"[A-Za-z]+")
_SHAPES = (  # a signature's shape -> its kind
    ("option", re.compile(r"^--?[A-Za-z]")),
    ("environment", re.compile(r"^\\begin\{")),
    ("command", re.compile(r"^\\(?!begin\{)[A-Za-z@]+")),
    ("statement", re.compile(r"^\.[A-Za-z]+\b")),
    ("function", re.compile(r"^[A-Za-z_][\w.:]*\s*\(")),
    ("key", re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+\b|^[A-Z][A-Z0-9_]{2,}\b"
                       r"|^[A-Za-z_][\w.-]*\s*=")),
)


def _nouns(text: str) -> frozenset[str]:
    return frozenset(_NOUN[w] for w in map(str.lower, _WORD.findall(text)) if w in _NOUN)


_COMPOUNDS = ((re.compile(r"\bcommand[- ]line\b", re.I), ""),  # "command-line option": an option
              (re.compile(r"\benvironment\s+variables?\b", re.I), "variable"))


def wanted_kinds(question: str) -> frozenset[str]:
    """The kinds of entry a question names ("which option ...": option; "command-line
    option": option; "environment variable": key)."""
    for rx, plain in _COMPOUNDS:
        question = rx.sub(plain, question)
    return _nouns(question)


def entry_kinds(signature: str, heading: str) -> frozenset[str]:
    """What an entry is: its signature's shape (``--output``: option, ``\\begin{frame}``:
    environment, ``\\patchcmd``: command, ``.include``: statement, ``f(x)``: function,
    ``General.Color``, ``HISTSIZE``, ``a = b``: key) and the kind nouns of the last part of
    its section's heading path ("Shell Builtin Commands")."""
    first = signature.strip().split("\n", 1)[0] if signature else ""
    shaped = frozenset(k for k, rx in _SHAPES if first and rx.match(first))
    return shaped | wanted_kinds(heading.rsplit(" > ", 1)[-1])


def kind_agreement(wanted: frozenset[str], kinds: frozenset[str]) -> int:
    """1 when the entry is a kind the question names, -1 when both are known and differ, else
    0."""
    if not wanted or not kinds:
        return 0
    return 1 if wanted & kinds else -1


# -- the score's share -----------------------------------------------------------------------------

# Weights of the two features in the linear score (``sentences.score``'s ``bonus``), set from the
# held-out choice on the dev probe (docs/results.md, "Entry expansion (issue 66, third session)").
TERMS_WEIGHT = 0.1  # held out: chosen for 12 of the 14 probe manuals
KIND_WEIGHT = 0.2  # held out: chosen for 2 of 14 (0 for the others)
MISMATCH_WEIGHT = 0.0  # held out: chosen for none
SOURCES = ("none", "index", "kind", "index+kind")  # Settings.quote_expansion


@dataclass(frozen=True)
class Weights:
    """The expansion's weights in the linear score: the index terms' match, a named kind's
    agreement, and what a kind's disagreement takes off."""

    terms: float = TERMS_WEIGHT
    kind: float = KIND_WEIGHT
    mismatch: float = MISMATCH_WEIGHT


@dataclass(frozen=True)
class PagedIndex:
    """A manual's back-of-book index with how a unit finds its page (``page_of(unit)``)."""

    back: "BackIndex"
    page_of: Callable


def bonus(question, sents: list, source: str, index: PagedIndex | None = None,
          weights: Weights = Weights()) -> list[float]:
    """Each unit's share of the score from its expansion (``source`` one of ``SOURCES``): the
    terms weight times the question's match with the index terms of the page the unit begins
    on, and the kind weight when its entry is a kind the question names (the mismatch weight
    taken off when it is another)."""
    out = [0.0] * len(sents)
    if "index" in source and index is not None and len(index.back):
        match = terms_match(question, [index.back.terms_on(index.page_of(s)) for s in sents])
        out = [x + weights.terms * float(m) for x, m in zip(out, match)]
    if "kind" in source:
        wanted = wanted_kinds(question.text)
        if wanted:
            for i, s in enumerate(sents):
                a = kind_agreement(wanted, entry_kinds(s.entry or s.text, s.heading))
                out[i] += weights.kind if a > 0 else -weights.mismatch if a < 0 else 0.0
    return out


def back_index_for(cache: dict, doc_id, sha256, tree) -> BackIndex:
    """The document's back-of-book index from a runtime's ``cache``, built on first use."""
    return per_document(cache, "back_index", doc_id, sha256, tree, lambda: BackIndex.build(tree))
