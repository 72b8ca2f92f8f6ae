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
never guessed). The file is the library's stored copy (``Library.get_source``) or is found by
content hash (``SourceFiles``): registered in the process (``engine.ask.register_source``) or
under ``<data_dir>/sources/<sha256>.pdf``.
"""
from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path

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


class SourceFiles:
    """Where a stored document's file is, by content hash: files registered in this process
    (``add``), else ``<folder>/<sha256><suffix>`` in the given folders."""

    def __init__(self, folders: list[Path] | None = None):
        self.folders = [Path(f) for f in (folders or [])]
        self.known: dict[str, Path] = {}
        self._pages: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def add(self, sha256: str, path: str | Path) -> None:
        self.known[sha256] = Path(path)

    def find(self, sha256: str, suffix: str = ".pdf") -> Path | None:
        p = self.known.get(sha256)
        if p is not None and p.is_file():
            return p
        for folder in self.folders:
            q = folder / f"{sha256}{suffix}"
            if q.is_file():
                return q
        return None

    def page_texts(self, sha256: str, suffix: str = ".pdf", load=None) -> list[str] | None:
        """Normalised text of every page of the file (cached), or None without the file.
        ``load()``: the file's bytes (or None) when no path is known, e.g. from the library."""
        with self._lock:
            if sha256 not in self._pages:
                import pymupdf

                path = self.find(sha256, suffix)
                data = load() if path is None and load is not None else None
                if path is None and not data:
                    return None
                with (pymupdf.open(path) if path is not None
                      else pymupdf.open(stream=data, filetype="pdf")) as doc:
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
