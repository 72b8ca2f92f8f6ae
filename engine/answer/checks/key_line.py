"""The key line: the manual's command, option, value, file or syntax line that answers a question,
verbatim, with its page, shown above the model's prose. Never generated.

Asked for when the question wants a name or a value (``wanted``): the answer-type cues
(``engine.answer.passages.answer_type``: how-to, option, syntax), a quantity (``check.QUANTITY``), a file
("which file", "where is ... stored"). The lines it may take are those of the units the reader
was given and of the quote (``engine.answer.passages.sentences.Sentence``), and the unit just before or
after one of them in the same section: an option table gives the option on one line and its
description in the next unit, and a sentence introduces the command after it, so the line and
the words that match the question are neighbours (a choice of ours: "the passage" is the
reader's units and their neighbours).

A line qualifies when it holds a term of the kind asked for (``engine.answer.checks.terms``: an option,
a command, a file, a number, a code line). Its score is the best sentence score
(``sentences.score``) of its unit and of the neighbour that describes it (the sentence after a
line) or introduces it (a sentence before it ending in a colon or unfinished), plus
``ANSWER_WEIGHT`` when the model's answer names the line's term (agreement between the two
breaks near-ties), ``LEAD_WEIGHT`` when the line opens with its term (a row of an option table,
a command line, rather than a name in passing), ``NAME_WEIGHT`` when the term's name holds a word
of the question, and ``QUOTE_WEIGHT`` when it is in the quote. A section's first
``HEAD_LINES`` units are candidates too when the reader saw any of its units, and a line that
opens one of them with its term scores as the section's best unit: a reference manual's
section opens with the command it documents (``\\patchcmd{<command>}{<search>}...``). Hand-written: no library picks a
line out of manual text; the rules are the few regexes of ``answer_type`` and ``terms``.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Sequence

from engine.answer.checks import terms
from engine.answer.passages.answer_type import HOWTO, OPTION, SYNTAX
from engine.answer.question import Question
from engine.answer.checks.check import QUANTITY
from engine.answer.passages.sentences import Sentence
from engine.answer.passages.units import introduces, is_code_line

COMMAND, VALUE, FILE = "command", "value", "file"
ANSWER_WEIGHT = 0.15
QUOTE_WEIGHT = 0.05
LEAD_WEIGHT = 0.15  # the line opens with its term: an option table's row, a command line
NAME_WEIGHT = 0.1  # the term's name holds a word of the question ("patch" in \\patchcmd)
HEAD_LINES = 2  # a section's first lines name what it documents (a command's signature)
MAX_CHARS = 200  # a longer "line" is a paragraph: its sentence holding the term is taken
_FILE_Q = re.compile(r"\b(which|what)\s+(file|directory|folder|path)\b|\bwhere\s+(is|are|does|do)\b"
                     r".*\b(stored|kept|saved|located|written|read|installed|put)\b", re.I)
_DEFAULT_Q = re.compile(r"\bdefault\b", re.I)
_COMMAND_Q = re.compile(r"\b(which|what)\s+(\w+\s+)?(command|macro|function|directive|keyword|"
                        r"environment|variable)s?\b", re.I)
# the term kinds that answer each kind of question
KINDS = {OPTION: {"option", "command", "identifier", "code"},
         COMMAND: {"command", "option", "code", "file", "identifier"},
         SYNTAX: {"command", "code", "identifier", "operator"},
         VALUE: {"number", "quoted", "file", "identifier"},
         FILE: {"file"}}
_SENTENCE = re.compile(r"(?<=[.!?;])\s+")
_GENERIC = {"which", "what", "where", "should", "would", "could", "optio", "comma", "value",
            "defau", "there", "about", "does", "using", "make", "with", "from", "that", "this",
            "file", "files", "synta"}


@dataclass(frozen=True)
class Shown:
    """What the key line is chosen from: ``ranked``, every unit of the routed sections
    (``sentences.Sentence``, best first); ``given``, the units the reader was given; the quote
    (None: none shown), whose units are found in ``ranked`` by text."""

    ranked: Sequence
    given: Sequence
    quote: Sentence | None = None


@dataclass(frozen=True)
class KeyLine:
    """One line of the manual, verbatim, where it is, and the term that makes it the key."""

    text: str
    page: int | None
    heading: str
    term: str  # the option, command, value or file the line gives
    in_quote: bool

    def as_json(self) -> dict:
        return asdict(self)


def wanted(question: Question) -> str | None:
    """What kind of line ``question`` asks for: ``OPTION``, ``COMMAND`` (how-to), ``SYNTAX``,
    ``VALUE``, ``FILE``; None when it asks for none (a definition, an explanation)."""
    q = question
    if _FILE_Q.search(q.text):
        return FILE
    if QUANTITY.search(q.text) or _DEFAULT_Q.search(q.text):
        return VALUE
    if _COMMAND_Q.search(q.text) and q.kind != OPTION:
        return COMMAND
    return {HOWTO: COMMAND, OPTION: OPTION, SYNTAX: SYNTAX}.get(q.kind)


def _line_terms(line: str, kind: str) -> list[str]:
    found = [t.text for t in terms.find_terms(line) if t.kind in KINDS[kind]]
    if kind in (COMMAND, SYNTAX) and not found and is_code_line(line) and len(line.split()) > 1:
        found = [line.split()[0]]  # "opam install why3": the line is the command
    return found


def _lines(text: str, kind: str) -> list[tuple[str, list[str]]]:
    """The lines of a unit that hold a term of ``kind`` (a long prose line: its sentences)."""
    out = []
    for line in text.split("\n"):
        line = line.strip()
        pieces = _SENTENCE.split(line) if len(line) > MAX_CHARS else [line]
        for piece in pieces:
            found = _line_terms(piece, kind)
            if found and len(piece) <= MAX_CHARS * 2:
                out.append((piece, found))
    return out


def choose(question: Question, shown: Shown, answer: str = "", page_of=None) -> KeyLine | None:
    """The key line (module docstring) from what was ``shown``; None when the question wants
    no line or no line qualifies. ``page_of(sentence)``: a unit's page
    (``grounding.sentence_pager``)."""
    q, ranked, quote = question, shown.ranked, shown.quote
    kind = wanted(q)
    if kind is None or not ranked:
        return None
    by_place = {(s.doc_id, s.node_id, s.index): s for s in ranked}
    quoted = set()
    if quote is not None:
        quoted = {(s.doc_id, s.node_id, s.index) for s in ranked
                  if s.node_id == quote.node_id and s.doc_id == quote.doc_id
                  and s.text in quote.text}
    seen = {(s.doc_id, s.node_id, s.index) for s in shown.given} | quoted
    places = seen | {(d, n, i + step) for d, n, i in seen for step in (-1, 1)} \
        | {(d, n, i) for d, n, _ in seen for i in range(HEAD_LINES)}
    best_in = {}  # a section's best unit score: what its head line documents
    for s in ranked:
        key = (s.doc_id, s.node_id)
        best_in[key] = max(best_in.get(key, s.score), s.score)
    asked = {w[:5] for w in re.findall(r"[a-z]{4,}", q.text.lower())} - _GENERIC
    said = terms.normalize(answer or "")
    best, best_score = None, float("-inf")
    for place in sorted(places, key=lambda p: (p[0] or 0, p[1], p[2])):
        unit = by_place.get(place)
        if unit is None:
            continue
        d, n, i = place
        after, before = by_place.get((d, n, i + 1)), by_place.get((d, n, i - 1))
        described = [after] if unit.kind == "line" and after is not None \
            and after.kind == "sentence" else []
        if before is not None and before.kind == "sentence" and introduces(before.text):
            described.append(before)
        score = max([unit.score] + [u.score for u in described])
        score += QUOTE_WEIGHT * (place in quoted)
        for line, found in _lines(unit.text, kind):
            agree = any(terms.contains(said, terms.normalize(t)) for t in found) if said else False
            leads = line.lstrip("$> ").startswith(found[0])
            named = any(w in terms.normalize(found[0]) for w in asked)
            base = best_in[(d, n)] if leads and i < HEAD_LINES else score
            s = max(score, base) + ANSWER_WEIGHT * agree + LEAD_WEIGHT * leads \
                + NAME_WEIGHT * named
            if s > best_score:
                page = page_of(unit) if page_of is not None else unit.page_start
                best, best_score = KeyLine(line, page, unit.heading, found[0],
                                           place in quoted), s
    return best
