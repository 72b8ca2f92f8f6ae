"""The Ask tab's ``view`` State: the last answer's notes as one immutable value (pure Python)."""
from __future__ import annotations

import dataclasses

import pytest

from app.views.pages import Line
from app.views.view_state import ViewState

EVIDENCE = [{"text": "Open the vent plug.", "page": 2, "score": 0.8, "doc_id": 1, "node_id": 4},
            {"text": "Fill the casing.", "page": 3, "score": 0.7, "doc_id": 1, "node_id": 5},
            {"text": "Refit the plug.", "page": None, "score": 0.6, "doc_id": 2, "node_id": 4}]


def test_a_new_view_leaves_everything_as_shown():
    assert all(getattr(ViewState(), f.name) is None for f in dataclasses.fields(ViewState))


def test_it_is_immutable_and_patched_by_replace():
    view = ViewState(agreement="both: 2", agreement_rows=[])
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.notice = "x"
    done = dataclasses.replace(view, notice="", evidence=EVIDENCE, offer_text=False)
    assert done.agreement == "both: 2" and done.notice == "" and view.notice is None


def test_node_lines_are_the_evidence_of_one_node_whatever_the_id_types():
    view = ViewState(evidence=EVIDENCE)
    assert view.node_lines("1", "4") == [Line("Open the vent plug.", 2, 0.8)]
    assert view.node_lines(2, 4) == [Line("Refit the plug.", None, 0.6)]
    assert view.node_lines(1, 9) == [] and ViewState().node_lines(1, 4) == []
