"""Evidence lines: the sentences of the cited sections that support an answer, with their pages.

Each cited section's body is split into sentences (``split_sentences``: paragraphs at blank
lines, lines inside a paragraph joined, then a cut after ``.``, ``!`` or ``?`` followed by a
space and a capital, digit, bracket, quote or backslash; pieces over 300 characters are cut at
their line breaks; pieces under 4 words and contents-style lines with dot leaders are dropped). The answer is split the same way (its
cut marker removed). Both go through the dense channel's sentence encoder (all-MiniLM-L6-v2);
a section sentence scores the highest cosine to any answer sentence. Lines at or above
``THRESHOLD`` are kept, best first, at most ``MAX_LINES``; below it none is shown (no line is
better than a wrong one). The threshold was chosen on the dev sets (docs/results.md, "Answers
a person can check").

Pages: a sentence of a one-page section is on that page. For a section over several pages the
PDF is read (PyMuPDF) and the sentence's opening words are looked up, normalised (case,
spacing, punctuation), on the section's pages; without the file the page is None (unknown,
never guessed). The file is the library's stored copy (``Library.get_source``), its pages
read once per content hash (``PageTexts``).
"""
from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass

import numpy as np

THRESHOLD = 0.75
MAX_LINES = 3
MAX_SENTENCE_CHARS = 300
MIN_WORDS = 4

_PARA = re.compile(r"\n\s*\n")
_SENT_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[`\\A-Z0-9])")
_CUT = re.compile(r"\s*\(cut at \d+ tokens\)\s*$")
_NORM = re.compile(r"[^0-9a-z]+")
_LEADER = re.compile(r"(?:\.\s){3,}")  # ". . . ." of contents lines and change logs


@dataclass
class EvidenceLine:
    doc_id: int | None
    node_id: int
    title: str
    page: int | None  # physical 1-based page of the PDF; None when unknown or not paged
    text: str
    score: float  # cosine of the sentence to the closest answer sentence
    page_label: str | None = None  # the page's printed label where the PDF gives one


@dataclass
class Section:
    """A cited section as the evidence reads it."""

    doc_id: int | None
    node_id: int
    title: str
    body: str
    page_start: int | None
    page_end: int | None


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (see the module docstring); whitespace collapsed."""
    out = []
    for para in _PARA.split(text or ""):
        lines = [ln.strip() for ln in para.splitlines() if ln.strip()]
        if not lines:
            continue
        pieces = _SENT_END.split(" ".join(lines))
        if len(lines) > 1 and any(len(p) > MAX_SENTENCE_CHARS for p in pieces):
            pieces = lines  # a listing or a table: its lines are the units
        out.extend(pieces)
    return [" ".join(s.split()) for s in out
            if len(s.split()) >= MIN_WORDS and not _LEADER.search(s)]


def strip_cut_marker(text: str) -> str:
    return _CUT.sub("", text or "")


def _norm(text: str) -> str:
    """Letters and digits only, lower case, ligatures unfolded (NFKC: "ﬁ" -> "fi")."""
    return _NORM.sub("", unicodedata.normalize("NFKC", text).lower())


class PageTexts:
    """Normalised text of every page of a PDF, read once per content hash (``get``), from the
    bytes a loader returns (the library's stored copy)."""

    def __init__(self):
        self._pages: dict[str, list[str] | None] = {}
        self._lock = threading.Lock()

    def get(self, sha256: str, load) -> list[str] | None:
        """The pages of the file with this hash; ``load()`` gives its bytes (None: unknown)."""
        with self._lock:
            if sha256 not in self._pages:
                import pymupdf

                data = load()
                if not data:
                    return None  # not cached: the file may be stored later
                with pymupdf.open(stream=data, filetype="pdf") as doc:
                    self._pages[sha256] = [_norm(page.get_text()) for page in doc]
            return self._pages[sha256]


def locate_page(sentence: str, start: int | None, end: int | None,
                pages: list[str] | None) -> int | None:
    """The 1-based page in [start, end] whose text holds the sentence's opening (or, when it
    runs over a page break, its close); None when unknown."""
    if start is None:
        return None
    if end is None or end <= start:
        return start
    if pages is None:
        return None
    key = _norm(sentence)
    probes = [key[:60], key[-60:], key[:30], key[-30:]]
    for probe in probes:
        if len(probe) < 12:
            continue
        for p in range(start, min(end, len(pages)) + 1):
            if probe in pages[p - 1]:
                return p
    return None


def evidence_lines(encoder, answer: str, sections: list[Section], *, pages_of=None,
                   threshold: float = THRESHOLD, max_lines: int = MAX_LINES,
                   keep_all: bool = False) -> list[EvidenceLine]:
    """The supporting sentences of ``sections`` for ``answer`` (module docstring).

    ``pages_of(section) -> list[str] | None`` gives the normalised page texts of its document.
    ``keep_all``: every scored sentence, no threshold and no cap (for choosing the threshold)."""
    if encoder is None:
        return []
    answer_sents = split_sentences(strip_cut_marker(answer))
    if not answer_sents:
        return []
    cands: list[tuple[Section, str]] = []
    seen = set()
    for s in sections:
        for sent in split_sentences(s.body):
            if sent not in seen:
                seen.add(sent)
                cands.append((s, sent))
    if not cands:
        return []
    vec = encoder.encode(answer_sents + [c[1] for c in cands])
    a, c = vec[: len(answer_sents)], vec[len(answer_sents):]
    score = (c @ a.T).max(axis=1)
    order = np.argsort(-score, kind="stable")
    out = []
    for i in order:
        if not keep_all and (score[i] < threshold or len(out) >= max_lines):
            break
        sec, sent = cands[i]
        pages = pages_of(sec) if (pages_of is not None and not keep_all) else None
        page = locate_page(sent, sec.page_start, sec.page_end, pages)
        out.append(EvidenceLine(doc_id=sec.doc_id, node_id=sec.node_id, title=sec.title,
                                page=page, text=sent, score=round(float(score[i]), 4)))
    return out
