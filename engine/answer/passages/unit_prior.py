"""A prior on the unit within its section: a code line yields to the prose that answers.

The linear score (``engine.answer.passages.sentences``) reads each unit apart, and its
answer-type cue (``answer_type.fits``) lifts every command or code line for a how-to question.
On a big manual such a line that repeats the question's words (an example, a comment in a
listing, a cross-reference line) then outranks the sentence that states the procedure.
``CodePrior`` takes a weight off a unit of shape "code" (``shape_of``) for a how-to question
(not for "which option" or "what syntax", whose answer is such a line). Chosen on the dev probe
against a section-opening prior, a length prior, a prior on other short lines and a line read
with the prose it belongs to, each weight held out by manual (docs/results.md, "The unit within the
section (issue 66, fourth session)").
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.answer.passages.answer_type import HOWTO
from engine.answer.passages.units import is_command_line

LINE_SHAPES = ("code", "line")  # shapes that are lines rather than prose


def shape_of(unit) -> str:
    """A unit's shape (``units.Unit.kind`` and ``text``): "code" (a line with a prompt or code
    punctuation, ``units.is_command_line``), "line" (another line: a label, a heading-like
    line, a synopsis word), "intro" (a sentence with the lines it introduces), "entry", "row"
    or "sentence"."""
    if unit.kind == "line":
        return "code" if is_command_line(unit.text.strip()) else "line"
    return unit.kind


@dataclass(frozen=True)
class CodePrior:
    """``weight`` taken off a code line for a how-to question (module docstring)."""

    weight: float = 0.0

    def bonus(self, qkind: str | None, shape: str) -> float:
        """What a unit of ``shape`` gets for a question of kind ``qkind``
        (``answer_type.question_type``)."""
        return -self.weight if qkind == HOWTO and shape == "code" else 0.0
