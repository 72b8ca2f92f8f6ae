"""bench.unit_probe compare: two collections of the dev probe's rows read question by question."""
from __future__ import annotations

import copy

from bench.unit_probe import compare


def _unit(order: int, cos: float, quote: str, holds: bool, page_right: bool) -> dict:
    return {"order": order, "unit": quote, "cos": cos, "lex": 0.5, "hm": 0.0, "fit": 0.0,
            "reach": True, "quote": quote, "page": 3, "holds": holds,
            "page_right": page_right, "fragment": False, "index": order, "words": 12,
            "owner": None, "shape": "prose"}


def _row(qid: str, units: list[dict]) -> dict:
    return {"id": qid, "manual": "toy", "pages": 40, "question": "How?", "qkind": "how",
            "units": units}


def test_a_swapped_quote_is_named_and_counted():
    first = [_row("toy-01", [_unit(0, 0.80, "The key is here.", True, True),
                             _unit(1, 0.79, "Something else entirely.", False, False)]),
             _row("toy-02", [_unit(0, 0.75, "Another key.", True, True)])]
    second = copy.deepcopy(first)
    second[0]["units"][1]["cos"] = 0.82  # the second unit now ranks first
    out = compare(first, second)
    assert "questions 2; the same quote text 1/2" in out
    assert "first: quote holds 2, page right 2, passages hold 2; second: 1, 1, 2" in out
    assert "toy-01" in out and "toy-02 " not in out
    assert "max 0.0300" in out
    same = compare(first, copy.deepcopy(first))
    assert "the same quote text 2/2" in same and "toy-0" not in same
