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


def test_the_answer_against_the_three_passages():
    """Issue 67's signals: the answer names the quote's entry, another passage's, or neither;
    the quote's lead over passage 2."""
    from engine.answer.checks.confidence import LEAD_CAP, entry_terms, passage_signals

    quote = "\\patchcmd[<prefix>]{<command>}{<search>}{<replace>}\nThis command patches a macro."
    second = "\\pretocmd{<command>}{<code>}\nThis command prepends code to a macro."
    assert entry_terms(quote) == {"patchcmd"}
    right = passage_signals("Use \\patchcmd to patch it.", [quote, second], [1.3, 1.2])
    assert right["entry_agree"] == 1.0 and right["other_entry"] == 0.0
    assert right["passages_agree"] == 1.0 and abs(right["quote_lead"] - 0.1) < 1e-9
    other = passage_signals("Use \\pretocmd.", [quote, second], [1.3, 1.25])
    assert other["entry_agree"] == 0.0 and other["other_entry"] == 1.0
    invented = passage_signals("Use \\hookcmd.", [quote, second], [1.3, 1.25])
    assert invented["passages_agree"] == 0.0 and invented["other_entry"] == 0.0
    assert passage_signals("x", [quote], [1.3])["quote_lead"] == LEAD_CAP
    none = passage_signals("Use it.", [], [])
    assert none["entry_agree"] == 0.5 and none["quote_lead"] == 0.0
