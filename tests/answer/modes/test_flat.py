"""engine.answer.modes.flat: the HMT-style baseline, one document, segment memories as slots."""
from __future__ import annotations

import pytest

from engine.answer.modes.flat import FlatMode
from engine.ask import AskError, AskOptions, ask
from engine.ingest import ingest_file
from tests.support.runtime import MANUAL


def test_flat_mode_generates_from_segment_slots(tiny_rt):
    rt, doc = tiny_rt
    assert FlatMode.needs_memories and FlatMode.needs_query_vector and FlatMode.one_document
    a = ask(rt, doc, "Which supply do large widgets need?",
            AskOptions(mode="flat", k=2, max_new_tokens=2, flat_segment_tokens=16), log=False)
    assert a.cited == [] and a.gate == {} and 1 <= a.metrics.generated_tokens <= 2
    assert a.route is not None and a.evidence == []


def test_flat_mode_answers_about_one_document_only(tiny_rt, tmp_path):
    rt, doc = tiny_rt
    md = tmp_path / "other.md"
    md.write_text(MANUAL.replace("Widgets", "Gadgets"))
    ingest_file(md, rt)
    with pytest.raises(AskError, match="one document at a time"):
        ask(rt, "all", "Which supply?", AskOptions(mode="flat"), log=False)
