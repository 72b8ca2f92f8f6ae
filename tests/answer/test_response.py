"""engine.answer.response: an answer is folded when the check flags it or it is degenerate."""
from __future__ import annotations

from engine.answer.checks.check import Check
from engine.answer.checks.terms import Term
from engine.answer.response import Answer, Generation, Metrics
from engine.answer.checks.review import Review


def _answer(check=None, degenerate=None) -> Answer:
    return Answer(text="Use --frob.", mode="text", cited=[], metrics=Metrics(),
                  review=Review(check=check), generation=Generation(degenerate=degenerate))


def test_folded_when_flagged_or_degenerate():
    flagged = Check(unsupported=[Term("--frob", "option", 4, 10)], checked=1)
    assert _answer(check=flagged).folded
    assert _answer(check=Check(checked=1), degenerate="repeat").folded
    assert not _answer(check=Check(checked=1)).folded and not _answer().folded
    out = _answer(check=flagged).as_json()
    assert out["unsupported"] == [{"term": "--frob", "kind": "option", "start": 4, "end": 10}]
    assert out["folded"] and out["check"]["line"].startswith("The model's answer names --frob")
    assert _answer().as_json()["check"] is None
