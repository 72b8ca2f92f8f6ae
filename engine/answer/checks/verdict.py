"""The answer check's verdict: the calibrated confidence of one answer, whether it is folded, and
the one line that says why, in words a person reads.

The line comes from the signal that pulls the confidence down most (``Confidence.weakest``);
each signal has its sentence (``reason``), filled with what the answer and the manual say (the
option the answer names, the key line's term). The rule-based check's own line
(``Check.line``: invented names, a denial, a conflicting number) is kept for those signals: it
names the terms.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.answer.checks import terms
from engine.answer.checks.check import Check, UNCHECKED_KINDS
from engine.answer.checks.confidence import reader_of
from engine.answer.question import Question
from engine.answer.checks.key_line import COMMAND, FILE, OPTION, SYNTAX, VALUE, KeyLine, wanted

_ASKED = {OPTION: "an option", COMMAND: "a command", SYNTAX: "a command or its syntax",
          VALUE: "a value", FILE: "a file"}
_KIND_WORD = {"option": "an option", "command": "a command", "file": "a file",
              "number": "a number", "identifier": "a name", "code": "code", "quoted": "a word",
              "operator": "an operator"}


@dataclass
class Verdict:
    """The confidence (None: no fitted model), the fold threshold, and the line said when it is
    below; ``signals``: what the confidence read (``engine.answer.checks.confidence.SIGNALS``)."""

    score: float | None
    threshold: float | None
    signals: dict[str, float] = field(default_factory=dict)
    weakest: str | None = None
    reason: str | None = None

    @property
    def low(self) -> bool:
        return self.score is not None and self.threshold is not None and \
            self.score < self.threshold

    def as_json(self) -> dict:
        return {"confidence": None if self.score is None else round(self.score, 4),
                "threshold": self.threshold, "low": self.low, "weakest": self.weakest,
                "reason": self.reason,
                "signals": {k: round(v, 4) for k, v in self.signals.items()}}


def _missing_from(answer: str, text: str | None) -> list[terms.Term]:
    norm = terms.normalize(text or "")
    return [t for t in terms.find_terms(answer)
            if t.kind not in UNCHECKED_KINDS and not terms.contains(norm, t.key)]


@dataclass(frozen=True)
class Said:
    """One answer as the verdict's line reads it: the question, the answer's text, the check's
    findings, the key line and the quote's text (None where there is none)."""

    question: Question
    answer: str
    check: Check | None = None
    key: KeyLine | None = None
    quote: str | None = None


def reason(weakest: str, said: Said) -> str:
    """One line saying why an answer is doubted, from its weakest signal."""
    question, answer, check, key, quote = (said.question, said.answer, said.check, said.key,
                                           said.quote)
    if weakest in ("unsupported", "supported_share", "denies", "number_conflict") and \
            check is not None and check.line:
        return check.line
    if weakest == "quote_agree":
        off = _missing_from(answer, quote)
        if off:
            t = off[0]
            return (f"The answer names {_KIND_WORD.get(t.kind, 'a term')} ({t.text}) that the "
                    "quoted passage does not give.")
    if weakest in ("key_agree", "quote_agree") and key is not None:
        return (f"The answer does not give {key.term}, which the manual's line for this "
                f"question gives.")
    if weakest == "type_miss":
        asked = _ASKED.get(wanted(question), "a name")
        return f"The question asks for {asked}, and the answer names none."
    return {
        "sim_mean": "Most of what the answer says is not said in the manual's passages.",
        "sim_min": "A sentence of the answer says something no passage of the manual says.",
        "lp_mean": "The model was unsure of its own words while writing this answer.",
        "lp_min": "The model was unsure of a word it chose in this answer.",
        "lp_known": "The model was unsure of its own words while writing this answer.",
        "repetition": "The answer repeats itself.",
        "route_margin": "The question matches several parts of the manual about equally well.",
        "quote_score": "No passage of the manual matches the question closely.",
        "cut": "The answer was cut off before it ended.",
        "words": "The answer is too short or too long to be checked well.",
        "key_agree": "The answer does not give the line the manual has for this question.",
        "quote_agree": "The answer's names are not those of the quoted passage.",
        "entry_agree": "The answer does not name what passage 1 below documents.",
        "passages_agree": "The answer names terms that none of the three passages below gives.",
        "other_entry": "The answer follows passage 2 or 3 below rather than passage 1.",
        "quote_lead": "Passage 1 below scores only a little above passage 2, and the answer "
                      "may follow the wrong one.",
    }.get(weakest, "The answer is probably wrong: its words do not match the manual's passages.")


def unfitted_reader(model, settings, reader) -> str | None:
    """The line said when ``model`` (``confidence.Confidence``) was fitted on another reader's
    answers than ``reader``'s (a served reader, another local model): its score would mean
    nothing there, so none is given. None when it fits, or when there is no model or reader."""
    if model is None or reader is None:
        return None
    if reader_of(settings) == model.reader:
        return None
    return (f"The answer check has no fit for the reader {reader.label}, so its answer is "
            "shown without the check's confidence: only the check's rules can fold it.")


def folds(check: Check | None, verdict: Verdict | None) -> bool:
    """Whether the check folds an answer: its confidence under the threshold; without a score
    (no fitted model, the check off, another reader) the rule check's flag (names the sources
    lack). With a score the flag is one of its signals (``unsupported``, ``supported_share``),
    no fold by itself: alone it folded right answers on the dev probe (docs/results.md, "The
    answer check on the screen (issue 67)")."""
    if verdict is not None and verdict.score is not None:
        return verdict.low
    return check is not None and check.flagged


def judge(model, signals: dict[str, float], said: Said) -> Verdict:
    """The verdict on one answer under ``model`` (``confidence.Confidence``; None: no score)."""
    if model is None:
        return Verdict(None, None, signals)
    score = model.score(signals)
    v = Verdict(score, model.threshold, signals)
    if v.low:
        v.weakest = model.weakest(signals)
        v.reason = reason(v.weakest, said)
    return v
