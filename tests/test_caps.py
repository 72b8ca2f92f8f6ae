"""Caps where requests enter (issue 44): k and the context budgets checked against the
settings (one line naming the limit), memory mode's slots capped to H2MT_MAX_MEMORY_SLOTS and the
context window, and a refused memory-mode ask never holds up a text ask beside it."""
from __future__ import annotations

import threading

import pytest

from engine.ask import AskError, AskOptions, ask
from engine.settings import Settings

GUIDE = "# Pump guide\n\n" + "".join(
    f"## Part {i}\n\nStep {i}: open vent plug {i}, fill the casing, refit the plug {i}.\n\n"
    for i in range(12))


@pytest.fixture(scope="module")
def rt(tiny_backbone, tiny_parts, tmp_path_factory):
    from engine.ingest import ingest_file
    from engine.runtime import Runtime
    from storage import Library

    folder = tmp_path_factory.mktemp("caps")
    settings = Settings(data_dir=folder, max_memory_slots=3)
    runtime = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    md = folder / "pump.md"
    md.write_text(GUIDE)
    runtime.doc_id = ingest_file(md, runtime).doc_id  # memories too
    tiny_backbone.model.generation_config.eos_token_id = None
    yield runtime
    runtime.library.close()


def test_sizes_over_the_settings_are_one_line_naming_the_limit(tmp_path):
    s = Settings(data_dir=tmp_path)
    with pytest.raises(AskError, match=r"^k must be at most 16 \(H2MT_MAX_K\), not 100000$"):
        AskOptions(mode="memory", k=100_000).validate(s)
    with pytest.raises(AskError, match="H2MT_MAX_BUDGET_TOKENS"):
        AskOptions(text_budget=10**9).validate(s)
    AskOptions(k=16).validate(s)
    AskOptions(k=100_000).validate()  # without settings: the engine's own rules only


def test_the_api_refuses_a_huge_k_naming_the_limit(tmp_path):
    from app.shared.ask_request import AskRequest

    req = AskRequest("1", "q?", "memory", 100000, 0, 0, True, False, 32, "fused")
    assert req.problems(Settings(data_dir=tmp_path)) == {
        "k": "k must be at most 16 (H2MT_MAX_K), not 100000"}


def test_a_huge_memory_ask_is_refused_while_a_text_ask_beside_it_completes(rt):
    results = {}

    def memory_ask():
        try:
            results["memory"] = ask(rt, rt.doc_id, "How do I open the vent plug?",
                                    AskOptions(mode="memory", k=100_000, max_new_tokens=8))
        except AskError as e:
            results["memory"] = e

    def text_ask():
        results["text"] = ask(rt, rt.doc_id, "How do I fill the casing?",
                              AskOptions(mode="text", max_new_tokens=16))

    threads = [threading.Thread(target=memory_ask), threading.Thread(target=text_ask)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert "H2MT_MAX_K" in str(results["memory"])
    assert results["text"].metrics.generated_tokens >= 1  # answered (the loop stop may end it)


def test_memory_slots_are_capped_to_the_best_scored_nodes(rt):
    a = ask(rt, rt.doc_id, "How do I open the vent plug?",
            AskOptions(mode="memory", k=16, max_new_tokens=4, router="lexical"))
    selected = a.route.selected
    assert len(selected) > 3  # the walk kept more than the cap
    cited = [c.node_id for c in a.cited]
    assert len(cited) == 3  # H2MT_MAX_MEMORY_SLOTS=3
    best = sorted(selected, key=lambda i: -a.route.scores[i])[:3]
    assert sorted(cited) == sorted(best)
