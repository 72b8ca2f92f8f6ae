"""ask(): every mode end to end, on a tiny random Llama and with the real backbone."""
from __future__ import annotations

import json

import pytest

from engine.answer.checks.confidence import SIGNALS

from engine.answer.modes import MODES
from engine.ask import AskError, AskOptions, ask
from engine.ingest import ingest_file
from engine.memory.parts import H2MTParts
from engine.runtime import Runtime
from engine.settings import Settings
from storage import Library
from tests.conftest import ETOOLBOX_TEXT
from tests.support.runtime import MANUAL, make_runtime, tiny_rt  # noqa: F401 (tiny_rt: fixture)



@pytest.mark.parametrize("mode", MODES)
def test_every_mode_runs_on_a_tiny_llama(tiny_rt, mode):
    rt, doc = tiny_rt
    ans = ask(rt, doc, "How do I power a large widget?", AskOptions(mode=mode, k=2, max_new_tokens=4))
    out = ans.as_json()
    json.dumps(out)  # the CLI's --json object is serialisable
    assert set(out) == {"answer", "mode", "route", "cited", "gate", "metrics", "router",
                        "alternatives", "warning", "evidence", "cut", "cut_at", "degenerate",
                        "repetition_cut", "stop", "quote", "passages", "short_answer",
                        "not_covered", "unsupported",
                        "folded", "form", "check", "reader", "reader_error", "mode_traits",
                        "confidence", "key_line", "key_line_shown", "places", "query_id"}
    # where the manual answers (engine.answer.shown): one place, several, weak, or none
    assert out["places"]["verdict"] in ("one place", "several places", "weak", "none")
    assert (out["places"]["verdict"] == "none") == (not out["passages"])
    assert out["short_answer"] is None  # off by default (H2MT_SHORT_ANSWER)
    # the passages shown: at most three, the quote first
    assert len(out["passages"]) <= 3 and (out["passages"][:1] == [out["quote"]]
                                          if out["quote"] else out["passages"] == [])
    # what the mode declares is what it did: it generated (a stop reason) or not; no evidence
    # lines where it has none; the quote as the answer only where it says so
    traits = out["mode_traits"]
    assert traits["name"] == mode and traits["generates"] == (out["stop"] is not None)
    assert traits["has_evidence"] or not out["evidence"]
    if traits["quote_is_answer"]:
        assert out["answer"] == (out["quote"]["text"] if out["quote"] else out["answer"])
    assert set(out["metrics"]) == {"ttft_ms", "total_ms", "route_ms", "prefill_tokens",
                                   "generated_tokens", "peak_mem_mb", "evidence_ms", "quote_ms",
                                   "query_vector_ms", "queue_ms", "prefill_ms", "decode_ms",
                                   "check_ms", "cpu_wait_ms", "rerank_ms", "rerank_tokens"}
    # every mode carries the quote (the manual's words), generation or not
    assert out["quote"] is not None and out["not_covered"] is False
    assert set(out["quote"]) == {"text", "doc", "node", "heading", "page", "page_label", "ocr",
                                 "score", "channel"}
    assert "widget" in out["quote"]["text"] and out["quote"]["text"] in " ".join(MANUAL.split())
    if mode == "full":
        assert out["route"] is None
    else:
        statuses = {r["status"] for r in out["route"]}
        assert "selected" in statuses and out["metrics"]["route_ms"] > 0
        # every scored node carries each channel's own and subtree score
        assert out["router"] == "fused"
        scored = [r for r in out["route"] if r["score"] is not None]
        assert scored and all(set(r["channels"]) == {"lexical", "dense", "memory"}
                              for r in scored)
        assert set(out["alternatives"]) == {"memory"}
    if mode in ("route", "quote"):  # nothing generated: nothing to check
        assert out["check"] is None and out["unsupported"] == [] and out["folded"] is False
        assert out["confidence"] is None and out["form"] is None
    else:  # the check's spans point into the answer (engine.answer.checks.check)
        assert set(out["check"]) == {"denies_coverage", "number_conflict", "flagged", "line"}
        assert all(out["answer"][u["start"]:u["end"]] == u["term"] for u in out["unsupported"])
        conf = out["confidence"]  # the calibrated confidence (engine.answer.checks.verdict)
        assert set(conf["signals"]) == set(SIGNALS)
        if conf["confidence"] is None:  # no fitted model (assets/answer_check.json): no fold
            assert conf["low"] is False and conf["reason"] is None
        else:
            assert 0 <= conf["confidence"] <= 1
            assert conf["low"] == (conf["confidence"] < conf["threshold"])
        fault = out["form"] is not None and out["form"]["fault"] is not None
        # the flag folds only where there is no score (engine.answer.checks.verdict.folds)
        checked = conf["low"] if conf["confidence"] is not None else out["check"]["flagged"]
        assert out["folded"] == (out["degenerate"] or fault or checked)
        assert (conf["reason"] is not None) == conf["low"]
    if mode == "route":
        assert out["answer"] == "" and out["metrics"]["generated_tokens"] == 0
    elif mode == "quote":
        assert out["answer"] == out["quote"]["text"] and out["metrics"]["generated_tokens"] == 0
    else:
        assert 1 <= out["metrics"]["generated_tokens"] <= 4
        assert out["metrics"]["prefill_tokens"] > 0 and out["metrics"]["ttft_ms"] > 0
    if mode == "memory":
        # one slot per selected node; the gate reports loops in [0, T] for each of them
        assert {int(k) for k in out["gate"]} == {c["id"] for c in out["cited"]}
        T = rt.parts.aligner.max_loops
        assert all(0 <= x <= T for v in out["gate"].values() for x in v)


def test_memory_prefill_is_slots_not_text(tiny_rt):
    rt, doc = tiny_rt
    mem = ask(rt, doc, "Where is widget.conf written?", AskOptions(mode="memory", k=1, max_new_tokens=1))
    full = ask(rt, doc, "Where is widget.conf written?", AskOptions(mode="full", max_new_tokens=1))
    assert mem.metrics.prefill_tokens < full.metrics.prefill_tokens


def test_questions_are_logged_with_route(tiny_rt):
    rt, doc = tiny_rt
    before = len(rt.library.list_queries(doc))
    ask(rt, doc, "Which supply do large widgets need?", AskOptions(mode="route"))
    log = rt.library.list_queries(doc)
    assert len(log) == before + 1
    assert log[-1].question == "Which supply do large widgets need?" and log[-1].route


def test_user_errors_are_clear(tiny_rt):
    rt, doc = tiny_rt
    with pytest.raises(AskError, match="empty"):
        ask(rt, doc, "   ")
    with pytest.raises(AskError, match="no document"):
        ask(rt, 999, "hello?")
    with pytest.raises(AskError, match="mode"):
        ask(rt, doc, "hello?", AskOptions(mode="telepathy"))


def test_hier_pos_changes_memory_answer_inputs(tiny_rt):
    rt, doc = tiny_rt
    a = ask(rt, doc, "Small widgets?", AskOptions(mode="memory", max_new_tokens=2, hier_pos=True), log=False)
    assert a.metrics.generated_tokens >= 1


@pytest.mark.real_model
def test_every_mode_and_router_with_the_real_backbone_on_a_corpus_manual(real_backbone, shared_dir,
                                                                        tmp_path, monkeypatch):
    """camlidl's manual (its first 12 pages: the whole one's memories take most of two minutes
    on one core), ingested with the real backbone, asked in every mode; then the routers on the
    same question: "null pointer" is answered in 3.2 Pointers ([unique] pointers map a null C
    pointer to None); routed on evidence or by its words the walk reaches it, and the memory
    router alone (the shipped parts) routes on the written memories."""
    from engine.answer.generation.reader import InProcessReader
    from tests.support.pdf_cut import first_pages

    rt = make_runtime(real_backbone, tmp_path)
    pdf = first_pages(shared_dir / "corpus" / "camlidl-manual_no-outline.pdf", 12,
                      tmp_path / "camlidl-1-12.pdf")
    doc = ingest_file(pdf, rt).doc_id
    # full mode reads the manual up to the reader's window: 8,192 tokens of prefill take over a
    # minute and a half on one core; 2,048 test the same path (bench.qa runs the whole window)
    monkeypatch.setattr(InProcessReader, "context_window", lambda self: 2048)
    q = "How do I declare that a pointer parameter may be null?"
    for mode in MODES:
        ans = ask(rt, doc, q, AskOptions(mode=mode, k=2, max_new_tokens=12))
        if mode != "route":
            # text, or (the untrained parts' fast paths may emit nothing usable) the engine's
            # own flag and warning instead of an empty answer
            assert ans.text.strip() or (ans.degenerate == "empty" and ans.warning), mode
            assert ans.metrics.generated_tokens >= (mode != "quote"), mode
        assert ans.quote is not None and ans.quote.page is not None, mode
        if mode in ("memory", "text", "route"):
            assert ans.cited and all(c.doc_id == doc for c in ans.cited)
            assert any(c.page_start for c in ans.cited)
    assert len(rt.library.list_queries(doc)) == len(MODES)

    tree = rt.library.get_tree(doc)

    def reaches(router: str) -> bool:
        ans = ask(rt, doc, q, AskOptions(mode="route", k=2, router=router), log=False)
        assert ans.route.router == router and ans.route.selected
        paths = [{n.title for n in tree.path(ans.route.nodes[i].node_id)} for i in ans.route.selected]
        return any("3.2 Pointers" in p for p in paths)

    assert reaches("fused")
    reaches("memory")  # the untrained memory score reaches it on some trees, not on others
    assert reaches("lexical")


@pytest.fixture(scope="session")
def reader_folder(real_backbone, tmp_path_factory):
    """The bundled backbone saved as a local model folder (the reader setting's other kind)."""
    import os
    import shutil

    from engine.memory.backbone import resolve_backbone

    # The dequantized GGUF cache is a plain transformers folder (config, safetensors, tokenizer);
    # save_pretrained refuses a GGUF-loaded model, so the folder is copied (hard links: cheap).
    source, _, _ = resolve_backbone(Settings())
    folder = tmp_path_factory.mktemp("reader") / "smollm2-folder"

    def link(src, dst):
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, folder, copy_function=link)
    return folder


@pytest.mark.real_model
def test_the_reader_is_a_setting_of_its_own(real_backbone, reader_folder, tmp_path):
    """H2MT_READER: the default reads with the backbone itself; a local folder is loaded as a
    separate model that text mode reads with, while routing and memories keep the backbone."""
    assert Settings.from_env({}).reader == "smollm2"
    assert Settings.from_env({"H2MT_READER": str(reader_folder)}).reader == str(reader_folder)
    rt = make_runtime(real_backbone, tmp_path)
    md = tmp_path / "widgets.md"
    md.write_text(MANUAL)
    doc = ingest_file(md, rt).doc_id
    q = "Which supply do large widgets need?"
    opts = AskOptions(mode="text", k=2, max_new_tokens=8)
    assert rt.reader.backbone is rt.backbone
    default = ask(rt, doc, q, opts, log=False)
    other = Runtime(rt.settings.with_(reader=str(reader_folder)), real_backbone, rt.parts,
                    rt.library)
    assert other.reader.backbone is not other.backbone and other.reader.name.startswith("local:")
    folder = ask(other, doc, q, opts, log=False)
    # the same weights read greedily: the same answer, from the same quote and context
    assert folder.text == default.text and folder.quote.text == default.quote.text
    assert folder.metrics.prefill_tokens == default.metrics.prefill_tokens
    broken = Runtime(rt.settings.with_(reader=str(tmp_path / "missing")), real_backbone,
                     rt.parts, rt.library)
    with pytest.raises(AskError, match="H2MT_READER"):
        ask(broken, doc, q, opts, log=False)


def test_candidate_path_through_ask(tiny_rt):
    """H2MT_CANDIDATES_MIN_NODES=0: the routed tree gets a candidate index, stored in the
    library and read back by a new runtime; the route is the exact path's."""
    rt, doc = tiny_rt
    q = "How do I power a large widget?"
    exact = ask(rt, doc, q, AskOptions(mode="route"), log=False).route
    assert exact.candidates is None
    forced = Runtime(rt.settings.with_(candidates_min_nodes=0), rt.backbone, rt.parts, rt.library)
    route = ask(forced, doc, q, AskOptions(mode="route"), log=False).route
    assert route.candidates is not None and route.selected == exact.selected
    assert dict(route.alternatives) == dict(exact.alternatives)
    keys = rt.library.candidate_index_keys()
    assert len(keys) == 1
    again = Runtime(forced.settings, rt.backbone, rt.parts, rt.library)
    assert ask(again, doc, q, AskOptions(mode="route"), log=False).route.selected == exact.selected
    assert rt.library.candidate_index_keys() == keys  # read back, not built again
    assert route.tree.candidates.key == keys[0]


@pytest.mark.real_model
@pytest.mark.xdist_group(ETOOLBOX_TEXT)
def test_the_first_example_quotes_the_patchcmd_entry_from_its_signature(etoolbox_text):
    """The product's first example on etoolbox's manual (its text layer): "How do I patch a
    command?" quotes \\patchcmd's entry, its signature line first."""
    rt, doc = etoolbox_text
    quote = ask(rt, doc, "How do I patch a command?", AskOptions(mode="quote", k=2),
                log=False).as_json()["quote"]
    assert quote["heading"].endswith("\\patchcmd")
    assert quote["text"].startswith("\\patchcmd[⟨prefix⟩]{⟨command⟩}{⟨search⟩}{⟨replace⟩}")
    assert quote["page"] == 13


@pytest.mark.real_model
def test_answers_decoded_in_a_process_of_their_own_equal_the_in_process_ones(real_backbone,
                                                                            tmp_path):
    """H2MT_GENERATION_PROCESS: text mode decoded by the child process gives the in-process
    answer (text, tokens, log-probabilities); memory mode still decodes in this process."""
    from engine.ask import generation_workers

    rt = make_runtime(real_backbone, tmp_path)
    md = tmp_path / "widgets.md"
    md.write_text(MANUAL)
    doc = ingest_file(md, rt).doc_id
    q = "Which supply do large widgets need?"
    apart = Runtime(rt.settings.with_(generation_process=True), real_backbone, rt.parts,
                    rt.library)
    worker = generation_workers(apart)(real_backbone.model)
    try:
        assert apart.model_settings(real_backbone.model) == apart.settings
        for mode in ("memory", "text"):  # the child starts with the first text answer
            opts = AskOptions(mode=mode, k=2, max_new_tokens=16)
            here, there = ask(rt, doc, q, opts, log=False), ask(apart, doc, q, opts, log=False)
            assert there.text == here.text and there.text.strip(), mode
            assert there.metrics.generated_tokens == here.metrics.generated_tokens, mode
            assert there.metrics.prefill_tokens == here.metrics.prefill_tokens, mode
            assert there.logprobs == pytest.approx(here.logprobs, abs=1e-5), mode
            assert (worker.pid is not None) == (mode == "text"), mode
    finally:
        worker.close()
