"""app.shared.lines: each state of the page said once, in plain words (issue 67)."""
from app.shared.lines import (EMPTY_QUESTION, NO_MANUAL, NOT_COVERED, check_word, evidence_line,
                              headline, highlighted, marked_answer, questions_line)
from engine.answer.shown import ONE, SEVERAL, WEAK

QUOTE = {"text": "x", "page": 8, "page_label": None, "heading": "Patching › part 2 of 4",
         "ocr": False}


def test_where_the_manual_answers():
    assert headline(None, True) == NOT_COVERED and headline(None, False) == ""
    assert "one clear place" in headline(QUOTE, False, ONE) and "(p. 8)" in headline(QUOTE, False)
    for verdict in (SEVERAL, WEAK):
        assert "both" in headline(QUOTE, False, verdict)
    assert "part 2 of 4" not in headline(QUOTE, False, ONE)


def test_a_highlight_is_called_what_it_is():
    assert highlighted(2, 2, "passage") == "the passage highlighted"
    assert "evidence" not in highlighted(1, 2, "passage")
    assert highlighted(2, 2, "evidence") == "2 of 2 evidence lines highlighted"
    assert evidence_line("text", True, False, 0).startswith("No evidence lines")


def test_a_folded_answer_is_not_called_clean():
    assert check_word({"check": {"flagged": False}, "folded": True}) == "folded"
    assert check_word({"check": {"flagged": True}, "folded": True}) == "flagged"
    assert check_word({"check": {"flagged": False}, "folded": False}) == "shown"
    assert "clean" not in {check_word({"check": {"flagged": f}, "folded": d})
                           for f in (True, False) for d in (True, False)}


def test_counts_and_marks():
    assert questions_line(5, "on the example manual.") == "Five questions on the example manual."
    assert marked_answer("again again again", True, "loop", None, "a loop").startswith(
        "(not an answer")
    assert marked_answer("Use --x.", True, None, "The model's answer names --x").startswith(
        "(not checked as right: ")
    assert marked_answer("", True, None, None) == "(the model wrote nothing)"
    assert NO_MANUAL.endswith(".") and EMPTY_QUESTION.endswith(".")
