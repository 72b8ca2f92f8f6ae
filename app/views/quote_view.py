"""The line above the answer (``#quote-view``): where the manual answers, in plain words.

The quote itself is passage 1 of the passages block after the answer
(app/views/passages_view.py); this line names its section and page and, once the other passages
are known, whether the manual has one clear place for the question or more than one candidate
(``engine.answer.shown.places``). Its words are app/shared/lines.py's.
"""
from __future__ import annotations

from app.shared.lines import NOT_COVERED, headline

__all__ = ["NOT_COVERED", "quote_markdown"]


def quote_markdown(quote, not_covered: bool, model_answers: bool = False,
                   verdict: str | None = None) -> str:
    """The line for a quote (``Quote``, or None: not covered, or nothing); ``verdict``:
    ``Places.verdict`` once the other passages are known. ``model_answers`` is kept for the
    callers' sake: the answer's own label says it is the model's."""
    return headline(quote.as_json() if quote is not None else None, not_covered, verdict)
