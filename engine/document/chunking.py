"""Paragraph-sized chunks at sentence boundaries: the leaves of an induced tree (H2MT 4.3).

H2MT 4.3 "first split each context document into chunks"; the paper does not say how. Here:
- consecutive paragraphs (blank-line separated) are packed into one chunk up to ``target``
  backbone tokens; a paragraph longer than that is cut at sentence ends, and a sentence longer
  still at word boundaries, into near-equal pieces;
- a short paragraph (at most ``HEADING_TOKENS``) arriving when the current chunk is at least half
  full starts a new chunk: in plain text such a line is usually a heading ("4. Conveying
  Verbatim Copies."), and it belongs with the text after it;
- every chunk keeps the page range of the units it came from (PDF pages; None for text);
- a very long paragraph or line is cut early and cheaply: one longer than ``target *
  MAX_TOKEN_CHARS`` characters is taken as over ``target`` tokens, so it goes to the sentence
  cut without being tokenized whole, and a sentence that long is first cut at whitespace into
  windows of about that many characters, each then cut as a long sentence; a "word" with no
  whitespace (a base64 blob, a minified line) is cut at characters. Tokenizing then costs one
  pass over the text in small pieces, never a pass over a megabyte at once.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# A sentence ends at . ! or ? (closing quotes/brackets allowed) before whitespace and a capital,
# a digit or an opening quote/bracket.
SENTENCE_END = _SENTENCE_END = re.compile(r"[.!?][\"'’”)\]]*\s+(?=[\"'‘“(\[]?[A-Z0-9])")
HEADING_TOKENS = 16
# Characters a token covers at most in prose (English averages about 4), so a text longer than
# target * MAX_TOKEN_CHARS characters is taken as over target tokens without counting them. Not
# a strict bound (SmolLM2 has tokens of up to 81 characters: runs of spaces, "=====" rules), and
# it need not be: a paragraph wrongly taken as long is cut at its sentences, which are then
# packed back into chunks as usual.
MAX_TOKEN_CHARS = 16
_WHITESPACE = re.compile(r"\s")


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
    """A sentence over ``target`` tokens cut at word boundaries into near-equal pieces; with
    fewer words than pieces (a long run without whitespace) cut at characters instead."""
    words = sentence.split()
    parts = math.ceil(tokens / target)
    if len(words) < parts:
        size = math.ceil(len(sentence) / parts)
        return [p for p in (sentence[i:i + size].strip() for i in range(0, len(sentence), size))
                if p]
    size = math.ceil(len(words) / parts)
    return [" ".join(words[i:i + size]) for i in range(0, len(words), size)]


def windows(text: str, width: int) -> list[str]:
    """``text`` cut into pieces of at most ``width`` characters, each ending at the last
    whitespace inside its window when there is one (a cheap cut: no tokenizer)."""
    out, start, n = [], 0, len(text)
    while start < n:
        end = min(n, start + width)
        if end < n:
            cut = max((m.start() for m in _WHITESPACE.finditer(text, start + width // 2, end)),
                      default=None)
            end = cut if cut is not None else end
        piece = text[start:end].strip()
        if piece:
            out.append(piece)
        start = end
    return out


def _pieces(units: Iterable[Unit], count: Callable[[str], int], target: int
            ) -> Iterator[_Piece]:
    para = 0
    for unit in units:
        text = unit.text.replace("\r\n", "\n").replace("\r", "\n")
        for p in (p.strip() for p in _PARAGRAPH_BREAK.split(text)):
            if not p:
                continue
            para += 1
            long_chars = target * MAX_TOKEN_CHARS
            if len(p) <= long_chars:  # else over target for sure: not tokenized whole
                n = count(p)
                if n <= target:
                    yield _Piece(p, n, para, True, unit.page_start, unit.page_end)
                    continue
            for sentence in sentences(p):
                for s in windows(sentence, long_chars) if len(sentence) > long_chars else [sentence]:
                    m = count(s)
                    parts = [s] if m <= target else _word_pieces(s, m, target)
                    for part in parts:
                        yield _Piece(part, m if len(parts) == 1 else count(part), para,
                                     False, unit.page_start, unit.page_end)


def chunk_units(units: Iterable[Unit], count: Callable[[str], int], target: int,
                max_chunks: int | None = None) -> list[Chunk]:
    """Chunks of at most about ``target`` tokens (``count`` gives a text's backbone tokens).
    ``max_chunks``: stop as soon as there are more (an untrusted file is not tokenized whole to
    learn that it is over the node limit)."""
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
        if max_chunks is not None and len(chunks) > max_chunks:
            return chunks
        new_paragraph = not buf or piece.paragraph != buf[-1].paragraph
        heading_like = new_paragraph and piece.whole and piece.tokens <= HEADING_TOKENS
        if buf and (used + piece.tokens + 1 > target or (heading_like and used >= target // 2)):
            flush()
        buf.append(piece)
        used += piece.tokens + (1 if len(buf) > 1 else 0)
    flush()
    return chunks
