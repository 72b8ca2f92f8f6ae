"""engine.answer.modes.memory: H2MT's slots in the prompt, one per selected node, with the gate."""
from __future__ import annotations

import pytest

from engine.answer.modes.memory import MemoryMode
from engine.ask import AskOptions, MemoriesPending, ask
from engine.ingest import ingest_file
from tests.support.runtime import MANUAL, make_runtime


def test_one_slot_per_selected_node_and_the_gate_per_slot(tiny_rt):
    rt, doc = tiny_rt
    assert MemoryMode.needs_memories and MemoryMode.fast_path and not MemoryMode.trims_loops
    a = ask(rt, doc, "Which supply do large widgets need?",
            AskOptions(mode="memory", k=2, max_new_tokens=2), log=False)
    assert [c.id for c in a.cited] == sorted(a.route.selected)  # document order
    assert set(a.gate) == {c.id for c in a.cited}
    text = ask(rt, doc, "Which supply do large widgets need?",
               AskOptions(mode="text", k=2, max_new_tokens=2, text_packing="sections"), log=False)
    assert a.metrics.prefill_tokens < text.metrics.prefill_tokens  # slots, not text


def test_memory_mode_waits_for_the_memories(tiny_backbone, tmp_path):
    rt = make_runtime(tiny_backbone, tmp_path)
    md = tmp_path / "widgets.md"
    md.write_text(MANUAL)
    doc = ingest_file(md, rt, memories=False).doc_id
    with pytest.raises(MemoriesPending, match="memory mode needs them"):
        ask(rt, doc, "Which supply?", AskOptions(mode="memory"), log=False)


def test_the_answer_is_checked_against_the_routed_sections_text(tiny_rt, monkeypatch):
    """Memory mode reads vectors, not text: its check reads the selected nodes' text and their
    descendants'."""
    import engine.answer.checks.review
    from engine.answer.checks.check import check_answer

    seen = {}

    def spy(answer, sources, *args, **kwargs):
        seen["sources"] = sources
        return check_answer(answer, sources, *args, **kwargs)

    monkeypatch.setattr(engine.answer.checks.review, "check_answer", spy)
    rt, doc = tiny_rt
    a = ask(rt, doc, "Which supply do large widgets need?",
            AskOptions(mode="memory", k=2, max_new_tokens=2), log=False)
    tree = rt.library.get_tree(doc)
    below = {i for c in a.cited for i in tree.subtree_ids(c.node_id)}
    want = [tree.node(i).local_text for i in sorted(below) if tree.node(i).text.strip()]
    assert a.check is not None and sorted(seen["sources"]) == sorted(want) and want
