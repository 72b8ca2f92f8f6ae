"""engine.answer.checks.confidence: the shipped fit belongs to today's passages."""
from __future__ import annotations


def test_the_shipped_check_was_fitted_or_checked_on_todays_passage_scorer():
    """The quote's score is one of the check's signals: a change of the units or of the passage
    score without a refit (bench.calibration fit), or a check of the fit on answers over the
    new passages (its card), leaves the check reading another scale unseen."""
    import json

    from engine.answer.passages.scorer_version import passage_scorer
    from engine.settings import SHIPPED_ANSWER_CHECK

    fitted = json.loads(SHIPPED_ANSWER_CHECK.read_text()).get("passages")
    assert fitted == passage_scorer(), (
        f"assets/answer_check.json was fitted or checked on passages '{fitted}', today's are "
        f"'{passage_scorer()}': refit it (assets/ANSWER_CHECK_CARD.md, Recipe)")
