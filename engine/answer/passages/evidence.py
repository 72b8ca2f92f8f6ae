"""Evidence lines: the sentences of the cited sections that support an answer, with their pages.

Each cited section's body is split into sentences (``units.split_sentences``: paragraphs at blank
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
read once per content hash (``pages.PageTexts``, ``pages.locate_page``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from engine.answer.passages.pages import locate_page
from engine.answer.passages.units import split_sentences

THRESHOLD = 0.75
MAX_LINES = 3
_CUT = re.compile(r"\s*\(cut at \d+ tokens\)\s*$")


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


def strip_cut_marker(text: str) -> str:
    return _CUT.sub("", text or "")


def evidence_lines(encoder, answer: str, sections: list[Section], pages_of=None,
                   manual_encoder=None) -> list[EvidenceLine]:
    """The supporting sentences of ``sections`` for ``answer`` (module docstring): those at or
    above ``THRESHOLD``, at most ``MAX_LINES``, best first, each on its page.

    ``pages_of(section) -> list[str] | None`` gives the normalised page texts of its document.
    ``manual_encoder``: encodes the sections' sentences (the manual's stored vectors,
    ``unit_vectors.stored_encoder``); ``encoder`` by default."""
    out = []
    for score, sec, sent in _scored(encoder, answer, sections, manual_encoder):
        if score < THRESHOLD or len(out) >= MAX_LINES:
            break
        pages = pages_of(sec) if pages_of is not None else None
        out.append(_line(sec, sent, score, pages))
    return out


def scored_lines(encoder, answer: str, sections: list[Section],
                 manual_encoder=None) -> list[EvidenceLine]:
    """Every scored sentence of ``sections`` for ``answer``, best first, no threshold and no
    cap, pages unread (for choosing the threshold)."""
    return [_line(sec, sent, score, None)
            for score, sec, sent in _scored(encoder, answer, sections, manual_encoder)]


def _line(sec: Section, sent: str, score: float, pages) -> EvidenceLine:
    page = locate_page(sent, sec.page_start, sec.page_end, pages)
    return EvidenceLine(doc_id=sec.doc_id, node_id=sec.node_id, title=sec.title, page=page,
                        text=sent, score=round(score, 4))


def _scored(encoder, answer: str, sections: list[Section],
            manual_encoder) -> list[tuple[float, Section, str]]:
    """(score, section, sentence) of every sentence of ``sections``, best first (ties in
    order): its best cosine to a sentence of ``answer``."""
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
    texts = [c[1] for c in cands]
    if manual_encoder is None:  # one batch, as the encoder reads both alike
        vec = np.asarray(encoder.encode(answer_sents + texts))
        a, c = vec[:len(answer_sents)], vec[len(answer_sents):]
    else:
        a, c = np.asarray(encoder.encode(answer_sents)), np.asarray(manual_encoder.encode(texts))
    score = (c @ a.T).max(axis=1)
    order = np.argsort(-score, kind="stable")
    return [(float(score[i]), *cands[i]) for i in order]
