"""What kind of passage a question asks for, and whether a unit is one (answer-type cues).

A how-to question wants a command or code line; "which option" an option line; "what is the
syntax of" a syntax line or block; "what is X" a definition. ``question_type`` reads the
question's wording; ``fits`` says whether a unit (``engine.answer.passages.units.Unit`` kind and text)
is of the kind asked for. The sentence score adds ``sentences.TYPE_WEIGHT`` when it fits
(docs/results.md, "Quotes that hold the fact": the weight was measured on both dev sets).

Hand-written: the cues are a handful of regular expressions over the question's opening words
and the unit's layout; no library classifies manual questions this way.
"""
from __future__ import annotations

import re

from engine.answer.passages.units import is_code_line

HOWTO, OPTION, SYNTAX, DEFINITION = "howto", "option", "syntax", "definition"
# The types whose answer is a name the manual prints: a command or code line, an option, a
# syntax line (a definition's answer is prose).
NAME_TYPES = (HOWTO, OPTION, SYNTAX)

_SYNTAX_Q = re.compile(r"\b(syntax|signature|usage|arguments? (does|do|of)"
                       r"|parameters? (does|do|of))\b", re.I)
_OPTION_Q = re.compile(r"\b(which|what)\s+(command[- ]line\s+)?(option|flag|switch|setting|"
                       r"parameter|argument)s?\b|\boption\b", re.I)
_HOWTO_Q = re.compile(r"\bhow\s+(do|can|should|would|could|to|does one)\b|\bwhat\s+command\b"
                      r"|\b(command|way)\s+to\b", re.I)
_DEF_Q = re.compile(r"^\s*(what|who)\s+(is|are)\s+(?!the\s+(syntax|difference|default|command))",
                    re.I)

_OPTION_LINE = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")
_SYNTAX_LINE = re.compile(r"[\[{<(]")
_DEFINES = re.compile(r"^\S+(\s+\S+){0,5}?\s+(is|are|means|stands for|refers to|denotes)\s", re.I)


def question_type(question: str) -> str | None:
    """``SYNTAX``, ``OPTION``, ``HOWTO``, ``DEFINITION`` or None (checked in that order)."""
    for kind, rx in ((SYNTAX, _SYNTAX_Q), (OPTION, _OPTION_Q), (HOWTO, _HOWTO_Q),
                     (DEFINITION, _DEF_Q)):
        if rx.search(question or ""):
            return kind
    return None


def _code_lines(kind: str, text: str) -> list[str]:
    lines = text.split("\n")
    if kind == "intro":
        return lines[1:]
    if kind == "entry":  # a signature, then its description's first sentence
        return lines[:-1]
    return lines if kind == "line" and is_code_line(text) else []


def fits(qtype: str | None, kind: str, text: str) -> bool:
    """Whether a unit of this ``kind`` and ``text`` is the kind of passage ``qtype`` asks for."""
    if qtype is None:
        return False
    code = _code_lines(kind, text)
    if qtype == HOWTO:
        return bool(code)
    if qtype == OPTION:
        return bool(_OPTION_LINE.search(text))
    if qtype == SYNTAX:
        return any(_SYNTAX_LINE.search(ln) for ln in code)
    return kind == "sentence" and bool(_DEFINES.search(text))
