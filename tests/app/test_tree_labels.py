"""The routing tree's labels never print over each other (app/views/tree_labels.py)."""
from app.views.tree_labels import Rows


def test_a_label_that_would_overlap_one_before_is_left_to_the_hover():
    rows = Rows(span=100, width_px=1000)  # 10 px per unit
    out = rows.place([0, 1, 10], [-1, -1, -1], ["+12", "+7", "+3"])
    assert out == ["+12", "", "+3"]


def test_rows_apart_and_labels_printed_earlier_count():
    rows = Rows(span=100, width_px=1000)
    assert rows.place([0], [-1], ["Patching"]) == ["Patching"]
    # the same place on another row is free; on the same row it is taken
    assert rows.place([0, 0], [-2, -1], ["+5", "+6"]) == ["+5", ""]
    assert rows.place([5], [-1], [""]) == [""]  # nothing to print takes no room
