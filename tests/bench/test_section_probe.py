"""bench.section_probe: the section-level rules replayed over recorded rows (issue 66, fifth
session)."""
from __future__ import annotations

from bench import section_probe as sp


def _unit(order: int, index: int, score: float, holds: bool = False, text: str = "") -> dict:
    text = text or f"unit {order} says something useful here"
    return {"order": order, "index": index, "score": score, "unit": text, "quote": text,
            "holds": holds, "page_right": holds, "fragment": False}


def _row(manual: str = "m") -> dict:
    """Two routed sections: A's best unit scores highest, B covers more of the question and
    holds the key in its opening."""
    a = {"node": 1, "rank": 0, "bm25": 10.0, "dense": 0.3, "heading": "A", "title_hm": 0.0,
         "cover": 0.4, "n_units": 2, "top": [1.00, 0.72], "holds": False,
         "units": [_unit(0, 0, 1.00), _unit(1, 1, 0.72)]}
    b = {"node": 2, "rank": 1, "bm25": 8.0, "dense": 0.6, "heading": "B", "title_hm": 0.5,
         "cover": 1.0, "n_units": 2, "top": [0.98, 0.90], "holds": True,
         "units": [_unit(2, 0, 0.90, holds=True), _unit(3, 1, 0.98)]}
    return {"id": f"{manual}-1", "manual": manual, "pages": 500, "question": "q?",
            "qkind": None, "sections": [a, b]}


def test_the_linear_order_is_the_units_by_score_at_the_bar():
    row = _row()
    row["sections"][0]["units"].append(_unit(4, 2, 0.69))
    assert [u["order"] for u in sp.linear_order(row)] == [0, 3, 2, 1]
    assert sp.verdicts(sp.linear_order(row))[0] is False


def test_sections_by_their_best_unit_keep_the_linear_quote():
    row = _row()
    grouped = sp.section_order(row, {}, None, grouped=True)
    assert [u["order"] for u in grouped] == [0, 1, 3, 2]
    spread = sp.section_order(row, {}, None, grouped=False)
    assert [u["order"] for u in spread] == [0, 3, 2, 1]


def test_a_section_feature_can_put_the_other_section_first():
    row = _row()
    assert sp.section_order(row, {"cover": 0.05}, None, True)[0]["order"] == 3
    assert sp.section_order(row, {"cover": 0.01}, None, True)[0]["order"] == 0


def test_the_opening_within_the_margin_starts_the_chosen_section():
    row = _row()
    first = sp.section_order(row, {"cover": 0.05}, 0.1, True)
    assert first[0]["order"] == 2 and sp.verdicts(first)[0] is True
    assert sp.section_order(row, {"cover": 0.05}, 0.05, True)[0]["order"] == 3


def test_a_weight_is_chosen_on_the_other_manuals():
    """The manual held out gets the weight that wins on the others, not on itself."""
    rows = [_row("x"), _row("y")]
    rows[1]["sections"][1]["units"][0]["holds"] = False  # y: the opening no longer holds

    def order_of(r, m):
        return sp.section_order(r, {"cover": 0.05}, m, True)

    chosen = sp.held_out(rows, order_of, [None, 0.1])
    assert chosen == {"x": None, "y": 0.1}


def test_the_ceiling_chooses_the_section_that_holds_the_key():
    """The right section (B, whose text holds the key) chosen by hand, then its best unit: that
    unit's quote does not hold the key, so the ceiling counts nothing; with B's best unit right,
    it counts the question."""
    row = _row()
    assert sp.oracle([row]).endswith("over 300 pages 0/1")
    row["sections"][1]["units"][1]["holds"] = True
    assert sp.oracle([row]).endswith("over 300 pages 1/1")


def test_the_likelihood_reorders_only_the_passages_it_read():
    row = _row()
    order = sp.linear_order(row)  # units 0, 3, 2, 1
    order[1]["ql"], order[2]["ql"] = -1.0, -3.0
    order[0]["ql"] = -5.0
    assert [u["order"] for u in sp.blend(order, 3, 1.0)] == [3, 0, 2, 1]
    assert [u["order"] for u in sp.blend(order, 3, 0.0)] == [0, 3, 2, 1]
    assert [u["order"] for u in sp.blend(order, 2, 100.0)] == [3, 0, 2, 1]
