"""The answer check: what a generated answer says that its sources do not.

Run on a finished answer against its sources: the text the reader was given (text and full
modes: the context; memory mode, which reads no text: the routed sections' text), the quote and
the question. Three rules, each a reason to flag the answer:

1. Unsupported terms. Every key term of the answer (``engine.answer.checks.terms``: options, commands,
   file names, identifiers, numbers, quoted words and the tokens of code spans) is looked up in
   the sources, both sides normalised as manuals write them (case, backslashes, dashes, quotes).
   A code span found whole is supported; else each of its tokens is looked up. Left out:
   capital-letter acronyms (``PDF``, ``CMYK``: the model writes them from its own vocabulary,
   and a passage rarely spells out the format it is about) and English stop words inside code
   (``with`` in ``plot sin(x) with lines``), and the last term of an answer that generation
   stopped (the token limit, the time limit or the repetition stop: often a name cut short). What no source holds is returned with its character span in
   the answer.
2. Denied coverage. The answer says that the manual, the context or the sections do not cover
   the question (``DENIALS``) while a quote, a passage above the confidence threshold, is shown.
3. A conflicting number. Narrowly: the question asks for a quantity (``QUANTITY``: "how many",
   "how long", "what is the default value", "exit code", ...), the quote holds exactly one number
   that the question does not (numbers with units count: ``10ms`` is 10), and the answer states
   numbers beyond the question's, none of them equal to the quote's. An answer giving no digit
   is not judged (spelled-out numbers are not read).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from engine.answer.checks import terms
from engine.answer.checks.terms import Term
from engine.answer.question import Question
from engine.routing.lexical import STOP_WORDS

UNCHECKED_KINDS = frozenset({"acronym"})
# Phrases saying the sources do not hold the answer (case-insensitive). The text prompt asks the
# model to say "the manual does not say"; the others are the ways a small model words it.
_SOURCE = (r"(?:manual|context|sections?|passages?|(?:given|provided) text|documentation|"
           r"document|information provided|provided information|text provided)")
_VERB = (r"(?:say|says|mention|mentions|cover|covers|contain|contains|provide|provides|include|"
         r"includes|specify|specifies|state|states|describe|describes|explain|explains|address|"
         r"addresses|give|gives|have|has|list|lists|discuss|discusses)")
DENIALS = re.compile(
    rf"\b{_SOURCE}\b[^.!?\n]{{0,60}}?\b(?:does not|doesn't|do not|don't|did not|didn't|"
    rf"cannot|can't|fails to|makes no)\s+(?:explicitly\s+|directly\s+|specifically\s+)?{_VERB}\b"
    rf"|\bnot\s+(?:explicitly\s+)?(?:mentioned|covered|specified|described|stated|provided|"
    rf"included|addressed|explained|listed|given|found|discussed)\s+in\s+(?:the\s+)?"
    rf"(?:given\s+|provided\s+)?{_SOURCE}\b"
    rf"|\b(?:there is |there's )?no (?:specific |relevant |such )?(?:information|mention|details?)"
    rf"\s+(?:about|on|of|regarding|in)\b"
    rf"|\bI (?:don't|do not|cannot|can't|could not|couldn't) (?:find|know|see|answer|determine)\b"
    rf"|\b(?:insufficient|not enough) (?:information|context)\b", re.I)
QUANTITY = re.compile(
    r"\bhow (?:many|much|long|large|big|small|often|wide|high|deep|far|fast)\b"
    r"|\b(?:what|which)(?: is| are| was)?(?: the)? (?:default |maximum |minimum |max |min )?"
    r"(?:number|value|version|port|size|length|limit|count|percentage|ratio|exit code|"
    r"exit status|return code|return value)\b"
    r"|\b(?:exit|return|status|error) (?:code|value|status)\b"
    r"|\bdefault (?:value|size|width|height|length|number|limit)\b", re.I)
_NUMBER = re.compile(r"(?<![\w.\-])(?<!\d[.,])\d+(?:\.\d+)?(?![.,]?\d)")  # units may follow
_LIST_MARK = re.compile(r"(?m)^\s*\d+[.)](?=\s)")


@dataclass(frozen=True)
class NumberConflict:
    """The answer's number for the asked quantity (as written, with its span) and the quote's."""

    answer: str
    quote: str
    start: int
    end: int


@dataclass
class Check:
    """What the check found in one answer (module docstring); ``checked``: terms looked up."""

    unsupported: list[Term] = field(default_factory=list)
    denies_coverage: bool = False
    number_conflict: NumberConflict | None = None
    checked: int = 0

    @property
    def flagged(self) -> bool:
        return bool(self.unsupported) or self.denies_coverage or self.number_conflict is not None

    @property
    def line(self) -> str | None:
        """The line shown above a flagged answer; None when nothing was found."""
        parts = []
        c = self.number_conflict
        names = list(dict.fromkeys(u.text for u in self.unsupported  # the conflict says its own
                                   if c is None or (u.start, u.end) != (c.start, c.end)))
        if names:
            named = _join(names[:4] + ([f"{len(names) - 4} more"] if len(names) > 4 else []))
            parts.append(f"The model's answer names {named}, which the manual's passages do "
                         "not contain.")
        if self.denies_coverage:
            parts.append("The model's answer says the manual does not cover this, though the "
                         "quote above is the manual's passage for it.")
        if c is not None:
            parts.append(f"The model's answer gives {c.answer} where the quote says {c.quote}.")
        return " ".join(parts) or None

    def as_json(self) -> dict:
        return {"unsupported": [u.as_json() for u in self.unsupported],
                "denies_coverage": self.denies_coverage,
                "number_conflict": (asdict(self.number_conflict)
                                    if self.number_conflict is not None else None),
                "flagged": self.flagged, "line": self.line}


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def unsupported_terms(answer: str, sources: str, cut: bool = False
                      ) -> tuple[list[Term], int]:
    """Rule 1: the answer's terms that ``sources`` (one text) does not hold, and how many terms
    were looked up. ``cut``: generation was stopped (not ended by the model), so a term at the
    very end may be a name cut short and is left out."""
    norm = terms.normalize(sources)
    whole = [(c.body_start, c.body_end) for c in terms.code_spans(answer)
             if terms.contains(norm, terms.normalize(answer[c.body_start:c.body_end]))]
    out, checked = [], 0
    for t in terms.find_terms(answer):
        if t.kind in UNCHECKED_KINDS or (t.kind == "code" and t.key in STOP_WORDS):
            continue
        if cut and t.end >= len(answer.rstrip()):
            continue
        checked += 1
        if any(s <= t.start and t.end <= e for s, e in whole):
            continue
        if not terms.contains(norm, t.key):
            out.append(t)
    return out, checked


def denies_coverage(answer: str) -> bool:
    """Rule 2's wording: the answer says its sources do not hold the answer (``DENIALS``)."""
    return DENIALS.search(answer or "") is not None


def _numbers(text: str) -> list[tuple[float, re.Match]]:
    masked = _LIST_MARK.sub(lambda m: " " * len(m.group()), text or "")
    return [(float(m.group()), m) for m in _NUMBER.finditer(masked)]


def number_conflict(answer: str, quote: str, question: Question) -> NumberConflict | None:
    """Rule 3 (module docstring): the answer's number against the quote's for the asked
    quantity; None when the question asks none, the quote is ambiguous or the answer agrees."""
    if not QUANTITY.search(question.text):
        return None
    asked = {v for v, _ in _numbers(question.text)}
    in_quote = {}
    for v, m in _numbers(quote):
        if v not in asked:
            in_quote.setdefault(v, m.group())
    if len(in_quote) != 1:
        return None
    (value, written), = in_quote.items()
    given = [(v, m) for v, m in _numbers(answer) if v not in asked]
    if not given or any(v == value for v, _ in given):
        return None
    m = given[0][1]
    return NumberConflict(m.group(), written, m.start(), m.end())


def check_answer(answer: str, sources: list[str], question: Question,
                 quote: str | None = None, cut: bool = False) -> Check:
    """The three rules on ``answer``: ``sources`` are the texts the reader was given (memory
    mode: the routed sections' text); ``quote`` is the shown quote's text (None: none shown);
    ``cut``: generation was stopped by a limit or the repetition stop, not ended by the model
    (``answer`` without the cut notice)."""
    given = "\n".join([*sources, quote or "", question.text])
    found, checked = unsupported_terms(answer, given, cut)
    return Check(unsupported=found, checked=checked,
                 denies_coverage=quote is not None and denies_coverage(answer),
                 number_conflict=number_conflict(answer, quote, question) if quote else None)
