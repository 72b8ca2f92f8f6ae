"""Paragraph-sized chunks at sentence boundaries: the leaves of an induced tree (H2MT 4.3).

H2MT 4.3 "first split each context document into chunks"; the paper does not say how. Here:
- consecutive paragraphs (blank-line separated) are packed into one chunk up to ``target``
  backbone tokens; a paragraph longer than that is cut at sentence ends, and a sentence longer
  still at word boundaries, into near-equal pieces;
- a short paragraph (at most ``HEADING_TOKENS``) arriving when the current chunk is at least half
  full starts a new chunk: in plain text such a line is usually a heading ("4. Conveying
  Verbatim Copies."), and it belongs with the text after it;
- every chunk keeps the page range of the units it came from (PDF pages; None for text).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Iterable

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# A sentence ends at . ! or ? (closing quotes/brackets allowed) before whitespace and a capital,
# a digit or an opening quote/bracket.
_SENTENCE_END = re.compile(r"[.!?][\"'’”)\]]*\s+(?=[\"'‘“(\[]?[A-Z0-9])")
HEADING_TOKENS = 16


@dataclass(frozen=True)
class Unit:
    """A stretch of body text in document order (a paragraph node, a page, a preamble)."""

    text: str
    page_start: int | None = None
    page_end: int | None = None


@dataclass(frozen=True)
class Chunk:
    text: str
    page_start: int | None
    page_end: int | None


@dataclass(frozen=True)
class _Piece:
    text: str
    tokens: int
    paragraph: int  # running paragraph number: pieces of one paragraph join with a space
    whole: bool  # the whole paragraph (not a sentence or part of one)
    page_start: int | None
    page_end: int | None


def sentences(paragraph: str) -> list[str]:
    """The paragraph cut after each sentence end (substrings, stripped; nothing dropped)."""
    out, start = [], 0
    for m in _SENTENCE_END.finditer(paragraph):
        out.append(paragraph[start:m.end()].strip())
        start = m.end()
    out.append(paragraph[start:].strip())
    return [s for s in out if s]


def _word_pieces(sentence: str, tokens: int, target: int) -> list[str]:
    """A sentence over ``target`` tokens cut at word boundaries into near-equal pieces."""
    words = sentence.split()
    parts = min(len(words), math.ceil(tokens / target))
    size = math.ceil(len(words) / parts)
    return [" ".join(words[i:i + size]) for i in range(0, len(words), size)]


def _pieces(units: Iterable[Unit], count: Callable[[str], int], target: int) -> list[_Piece]:
    out: list[_Piece] = []
    para = 0
    for unit in units:
        text = unit.text.replace("\r\n", "\n").replace("\r", "\n")
        for p in (p.strip() for p in _PARAGRAPH_BREAK.split(text)):
            if not p:
                continue
            para += 1
            n = count(p)
            if n <= target:
                out.append(_Piece(p, n, para, True, unit.page_start, unit.page_end))
                continue
            for s in sentences(p):
                m = count(s)
                parts = [s] if m <= target else _word_pieces(s, m, target)
                for part in parts:
                    out.append(_Piece(part, m if len(parts) == 1 else count(part), para,
                                      False, unit.page_start, unit.page_end))
    return out


def chunk_units(units: Iterable[Unit], count: Callable[[str], int], target: int) -> list[Chunk]:
    """Chunks of at most about ``target`` tokens (``count`` gives a text's backbone tokens)."""
    chunks: list[Chunk] = []
    buf: list[_Piece] = []
    used = 0

    def flush() -> None:
        nonlocal buf, used
        if buf:
            text = buf[0].text
            for prev, cur in zip(buf, buf[1:]):
                text += (" " if cur.paragraph == prev.paragraph else "\n\n") + cur.text
            pages = [p for b in buf for p in (b.page_start, b.page_end) if p is not None]
            chunks.append(Chunk(text, min(pages) if pages else None,
                                max(pages) if pages else None))
        buf, used = [], 0

    for piece in _pieces(units, count, target):
        new_paragraph = not buf or piece.paragraph != buf[-1].paragraph
        heading_like = new_paragraph and piece.whole and piece.tokens <= HEADING_TOKENS
        if buf and (used + piece.tokens + 1 > target or (heading_like and used >= target // 2)):
            flush()
        buf.append(piece)
        used += piece.tokens + (1 if len(buf) > 1 else 0)
    flush()
    return chunks
