"""``quote``: the manual's best passage alone (``engine.answer.passages.quote``), no generation."""
from __future__ import annotations

from engine.answer.modes.base import Mode, Step
from engine.answer.request import Request

NOT_COVERED = "The manual does not seem to cover this: no passage of the routed sections matches it."


class QuoteMode(Mode):
    name = "quote"
    help = "only the manual's best passage, in its own words (no answer written)"
    label = "The manual's words only"
    quote_first = True  # the quote is the answer
    generates = False
    quote_is_answer = True

    def plan(self, inputs: Request, ranked, quote) -> Step:
        return Step(None, [quote.rid] if quote is not None else [])

    def text_without_generation(self, quote):
        return quote.text if quote is not None else NOT_COVERED
