"""The explorer's flow through its HTTP API (gradio_client): ingest (phase one, memories in the
background), library, ask (with a router), node, compare.

Runs the real backbone on CPU; the app and its library are shared with the browser test. The
manual is camlidl's first 12 pages (``camlidl_cut``): the real backbone writes its memories in
the background during the flow.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest

from app.ui import HISTORY_ROWS, LIBRARY_COLUMNS, memory_writer, route_from_log
from app.views.figures import figure_summary
from app.views.route_tables import CHANNEL_COLUMNS, ROUTE_COLUMNS
from app.views.visible_tree import visible_tree
from storage import QueryEntry
from tests.conftest import CAMLIDL_CUT
from tests.support.memory_writer import hold_memory_writer

pytestmark = pytest.mark.real_model

CORPUS_PDF = CAMLIDL_CUT
QUESTION = "How are arrays passed between C and OCaml?"
MEMORIES_S = 600  # the background writer on a 2-core CPU


def _memories_cell(table: dict, doc_id: int) -> str:
    row = next(r for r in table["data"] if r[0] == doc_id)
    return row[LIBRARY_COLUMNS.index("memories")]


@pytest.fixture(scope="module")
def client(explorer_server):
    from gradio_client import Client

    url, _ = explorer_server
    return Client(url, verbose=False)


def test_api_flow(client, explorer_server, camlidl_cut):
    from gradio_client import handle_file

    _, rt = explorer_server
    pdf = camlidl_cut
    status, table, lib_doc, ask_doc, cmp_doc = client.predict([handle_file(str(pdf))],
                                                              api_name="/ingest")
    assert "✓" in status and CORPUS_PDF in status, status
    doc = next(d for d in rt.library.list_documents() if d.file_name == CORPUS_PDF)
    assert doc.n_nodes > 10 and doc.pages == 12
    assert any(row[0] == doc.id for row in table["data"])
    # phase one only: the upload returns before the memories are written (in the background)
    if "being written in the background" in status:
        cell = _memories_cell(table, doc.id)
        assert cell == "ready" or cell.startswith("memories "), cell
    else:
        assert "Memories ready" in status, status

    n_docs = len(rt.library.list_documents())

    lib = client.predict(api_name="/library")
    assert any(row[0] == doc.id for row in lib[0]["data"])

    # the nine parameters of before the router still work (the router defaults to fused)
    outputs = client.predict(str(doc.id), QUESTION, "text", 3, 0, 0, True, False, 32,
                             api_name="/ask")
    answer, metrics, cited, plot, icicle, route_rows, summary, history, *_ = outputs
    assert answer.strip()
    assert "TTFT" in metrics
    assert cited["data"], "text mode cites the nodes whose text it used"
    # the figure the browser receives, and its summary, match the logged route
    fig = json.loads(plot["plot"]) if isinstance(plot, dict) else plot
    s = figure_summary(fig)
    assert s == {k: summary[k] for k in s}
    rec = rt.library.list_queries(doc.id)[-1]
    route = route_from_log(rec.route, rec.settings)
    counts = Counter(n.status for n in route.nodes)
    assert s["nodes"] == {"root": 1, "selected": counts["selected"], "pruned": counts["pruned"]}
    assert s["collapsed_markers"] == len(visible_tree(route).collapsed)
    assert s["represented_nodes"] == doc.n_nodes
    assert s["colorbar"]
    assert history["data"][0][3] == QUESTION
    assert summary["router"] == "fused" and rec.settings["router"] == "fused"
    assert len(rt.library.list_documents()) == n_docs

    # a router chosen by name: the route and its log record carry that channel's scores; the
    # history lists the newest questions only, however long the log (it used to read it whole)
    for i in range(HISTORY_ROWS + 5):
        rt.library.log_query(QueryEntry(f"old question {i}", "route", doc_id=doc.id))
    outputs = client.predict(str(doc.id), QUESTION, "route", 3, 0, 0, True, False, 8, "lexical",
                             api_name="/ask")
    history = outputs[7]["data"]
    assert len(history) == HISTORY_ROWS and history[0][3] == QUESTION
    assert history[-1][3] == "old question 6"
    rows, summary = outputs[5], outputs[6]
    assert summary["router"] == "lexical" and summary["nodes"]["selected"] >= 1
    assert rows["headers"] == ROUTE_COLUMNS
    lex = ROUTE_COLUMNS.index(CHANNEL_COLUMNS[0])
    selected = [r for r in rows["data"] if r[0] == "selected"]
    assert selected and all(isinstance(r[lex], (int, float)) for r in selected), selected
    rec = rt.library.list_queries(doc.id)[-1]
    assert rec.mode == "route" and rec.settings["router"] == "lexical"
    scored = [r for r in rec.route if r["status"] in ("selected", "pruned")]
    # every available channel is scored whatever the router (the router picks the weights)
    assert scored and all({"lexical", "dense"} <= set(r["channels"]) for r in scored)
    assert all(set(v) == {"own", "subtree"} for r in scored for v in r["channels"].values())
    assert route_from_log(rec.route, rec.settings).router == "lexical"
    with pytest.raises(Exception):  # not a router: refused
        client.predict(str(doc.id), QUESTION, "route", 3, 0, 0, True, False, 8, "oracle",
                       api_name="/ask")

    # the memories come in the background; once written the library says "ready" and the
    # memory router and memory mode answer
    assert memory_writer(rt).wait_idle(MEMORIES_S), "the memories were not written in time"
    assert rt.library.memory_progress(doc.id, rt.fingerprint).complete
    lib = client.predict(api_name="/library")
    assert _memories_cell(lib[0], doc.id) == "ready"
    outputs = client.predict(str(doc.id), QUESTION, "route", 3, 0, 0, True, False, 8, "memory",
                             api_name="/ask")
    summary = outputs[6]
    assert summary["router"] == "memory" and set(summary["alternatives"]) == {"fused"}
    rec = rt.library.list_queries(doc.id)[-1]
    scored = [r for r in rec.route if r["status"] in ("selected", "pruned")]
    assert all("memory" in r["channels"] for r in scored)
    # the fused alternative means something only when the route carries the other channels
    if len(scored[0]["channels"]) >= 2:
        assert summary["agreement"] is not None
    else:
        assert summary["agreement"] is None
    # the fused router with every memory written: both routers' selections are compared
    outputs = client.predict(str(doc.id), QUESTION, "route", 3, 0, 0, True, False, 8, "fused",
                             api_name="/ask")
    summary = outputs[6]
    assert summary["warning"] is None and set(summary["alternatives"]) == {"memory"}
    counts = summary["agreement"]
    assert set(counts) == {"both", "fused_only", "memory_only"}
    assert counts["both"] + counts["fused_only"] == summary["nodes"]["selected"]

    head, text = client.predict(cited["data"][0][3], cited["data"][0][4], api_name="/node")
    assert "p." in head and text

    out = client.predict(str(doc.id), QUESTION, "route", "text", 3, 0, 0, True, 16,
                         api_name="/compare")
    ans_a, met_a, plot_a, ans_b, met_b, plot_b, table = out
    assert ans_b.strip() and "prefill tokens" in met_b
    modes = [r[0] for r in table["data"]]
    assert modes == ["route", "text"]


def test_api_ask_streams_route_first_then_tokens(client, explorer_server, camlidl_cut):
    """/ask is a stream: the routing tree (and the sections to be read) come first, before any
    token; then the answer grows; the last output is the whole answer with its evidence lines
    (in the summary), each on a page of its section."""
    from gradio_client import handle_file

    _, rt = explorer_server
    status, *_ = client.predict([handle_file(str(camlidl_cut))],
                                api_name="/ingest")  # stored by test_api_flow: reused
    doc = next(d for d in rt.library.list_documents() if d.file_name == CORPUS_PDF)
    job = client.submit(str(doc.id), QUESTION, "text", 3, 0, 0, True, False, 24, "fused",
                        api_name="/ask")
    final = job.result(timeout=600)
    outputs = job.outputs()
    assert len(outputs) >= 4, f"{len(outputs)} outputs: /ask did not stream"
    answer, metrics, cited, plot, icicle, route_rows, summary, history, *_ = outputs[0]
    assert answer == "" and "TTFT" not in metrics and summary["generating"] is True
    assert summary["nodes"]["selected"] >= 1 and cited["data"], "the tree and sections first"
    streamed = outputs[1:-1]  # the last: the final answer once logged (its query id)
    while streamed and streamed[-1][0] == final[0]:  # the final answer before it was logged
        streamed = streamed[:-1]
    grown = [o[0] for o in streamed if o[0]]
    # each streamed state agrees with the final answer on their common part (the final answer
    # may be the streamed text trimmed back to its last whole sentence: engine.answer.checks.form)
    assert len(set(grown)) >= 2 and all(final[0].startswith(t) or t.startswith(final[0])
                                        for t in grown), grown[:4]
    assert [len(t) for t in grown] == sorted(len(t) for t in grown)
    summary = final[6]
    assert "TTFT" in final[1] and summary["answer"] == rt.library.list_queries(doc.id)[-1].answer
    assert summary["degenerate"] is None and isinstance(summary["evidence"], list)
    tree = rt.library.get_tree(doc.id)
    cited_nodes = {(r[3], r[4]) for r in final[2]["data"]}
    for e in summary["evidence"]:
        assert (e["doc_id"], e["node_id"]) in cited_nodes
        node = tree.node(e["node_id"])
        assert e["page"] is None or node.page_start <= e["page"] <= node.page_end, e


def test_fresh_client_asks_about_a_manual_stored_before_it_connected(client, explorer_server,
                                                                     camlidl_cut):
    """A script's first call names a stored manual by id: no /library call needed; an unknown
    id is one clear line (it used to be "Value: 1 is not in the list of choices: []")."""
    from gradio_client import Client, handle_file

    url, rt = explorer_server
    pdf = camlidl_cut
    if not any(d.file_name == CORPUS_PDF for d in rt.library.list_documents()):
        client.predict([handle_file(str(pdf))], api_name="/ingest")
    doc = next(d for d in rt.library.list_documents() if d.file_name == CORPUS_PDF)
    fresh = Client(url, verbose=False)
    outputs = fresh.predict(str(doc.id), QUESTION, "route", 3, 0, 0, True, False, 8, "fused",
                            api_name="/ask")
    assert outputs[6]["nodes"]["selected"] >= 1
    rows, _, _ = Client(url, verbose=False).predict(str(doc.id), api_name="/outline")
    assert len(rows["data"]) == doc.n_nodes
    missing = max(d.id for d in rt.library.list_documents()) + 100
    for api, args in (("/ask", (str(missing), QUESTION, "route", 3, 0, 0, True, False, 8,
                                "fused")),
                      ("/outline", (str(missing),))):
        with pytest.raises(Exception) as e:
            Client(url, verbose=False).predict(*args, api_name=api)
        assert f"id {missing}" in str(e.value) and "list of choices" not in str(e.value), \
            (api, str(e.value))


def test_api_rejects_bad_upload(client, tmp_path):
    from gradio_client import handle_file

    fake = tmp_path / "not-really.pdf"
    fake.write_text("just text, no PDF header\n" * 20)
    status, *_ = client.predict([handle_file(str(fake))], api_name="/ingest")
    assert "✗" in status and "not a PDF" in status


def test_api_escapes_markup_titles_and_deletes(client, explorer_server, tmp_path):
    from gradio_client import handle_file

    _, rt = explorer_server
    md = tmp_path / "evil.md"
    md.write_text("# Guide\n\nIntro text.\n\n## <script>alert(1)</script> Setup\n\n"
                  "Run the installer and follow the steps.\n\n## Usage\n\nCall the tool.\n")
    status, *_ = client.predict([handle_file(str(md))], api_name="/ingest")
    assert "✓" in status, status
    doc = next(d for d in rt.library.list_documents() if d.file_name == "evil.md")
    out = client.predict(str(doc.id), "How do I set it up?", "route", 3, 0, 0, True, False, 8,
                         api_name="/ask")
    plot, summary = out[3], out[6]
    text = plot["plot"] if isinstance(plot, dict) else json.dumps(plot)
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert summary["represented_nodes"] == doc.n_nodes
    client.predict(str(doc.id), api_name="/delete_manual")
    assert all(d.id != doc.id for d in rt.library.list_documents())


def test_api_memory_mode_waits_for_memories_with_a_notice(client, explorer_server, tmp_path,
                                                         monkeypatch):
    """Memory mode on a manual whose memories are still being written: no error, the engine's
    one-line message as a notice, nothing logged; once written, memory mode answers."""
    from gradio_client import handle_file

    _, rt = explorer_server
    writer, gate = hold_memory_writer(rt, monkeypatch, MEMORIES_S)
    md = tmp_path / "pending.md"
    md.write_text("# Pump manual\n\n## Priming\n\nOpen the bleed valve and fill the housing "
                  "with water before the first start.\n\n## Storage\n\nDrain the pump before "
                  "frost.\n")
    try:
        status, table, *_ = client.predict([handle_file(str(md))], api_name="/ingest")
        assert "✓" in status and "being written in the background" in status, status
        doc = next(d for d in rt.library.list_documents() if d.file_name == "pending.md")
        assert _memories_cell(table, doc.id).startswith(f"memories 0/{doc.n_nodes}")
        n_logged = len(rt.library.list_queries(doc.id))
        # text and route modes answer at once
        out = client.predict(str(doc.id), "How do I prime the pump?", "route", 3, 0, 0, True,
                             False, 8, api_name="/ask")
        assert out[6]["router"] == "fused" and "memories are being written" in out[6]["warning"]
        assert out[6]["agreement"] is None
        # memory mode, and the memory router, wait: a notice, not an error
        for mode, router in (("memory", "fused"), ("route", "memory")):
            client.predict(str(doc.id), "How do I prime the pump?", mode, 3, 0, 0, True, False,
                           8, router, api_name="/ask")
        assert len(rt.library.list_queries(doc.id)) == n_logged + 1  # only the route answer
    finally:
        gate.set()
    assert writer.wait_idle(MEMORIES_S)
    assert rt.library.memory_progress(doc.id, rt.fingerprint).complete
    out = client.predict(str(doc.id), "How do I prime the pump?", "memory", 3, 0, 0, True, False,
                         8, "fused", api_name="/ask")
    assert out[6]["mode"] == "memory" and out[6]["warning"] is None
    assert out[6]["agreement"] is not None
    client.predict(str(doc.id), api_name="/delete_manual")


def test_a_crashed_request_fails_alone_and_the_next_one_works(client, explorer_server,
                                                              camlidl_cut, monkeypatch):
    """The model fails in the middle of one answer (a RuntimeError from the generation worker's
    prefill, engine/serving/worker.py): that caller gets one line with a reference to the
    server's log (never the exception's text, issue 44), the app stays up, and the next
    question is answered."""
    from gradio_client import Client, handle_file

    url, rt = explorer_server
    pdf = camlidl_cut
    if not any(d.file_name == CORPUS_PDF for d in rt.library.list_documents()):
        client.predict([handle_file(str(pdf))], api_name="/ingest")
    doc = next(d for d in rt.library.list_documents() if d.file_name == CORPUS_PDF)
    from engine.serving.worker import GenerationWorker

    calls = []

    def failing_prefill(self, ticket):
        calls.append(1)
        raise RuntimeError("simulated model failure")

    monkeypatch.setattr(GenerationWorker, "_prefill", failing_prefill)
    with pytest.raises(Exception) as e:
        client.predict(str(doc.id), QUESTION, "text", 3, 0, 0, True, False, 16, api_name="/ask")
    assert calls, "the failing model was called"
    message = str(e.value)
    assert "internal error, ref " in message and "still running" in message, message
    assert "simulated model failure" not in message  # the detail is in the log only
    monkeypatch.undo()
    answer, metrics, *_ = Client(url, verbose=False).predict(
        str(doc.id), QUESTION, "text", 3, 0, 0, True, False, 16, api_name="/ask")
    assert answer.strip() and "TTFT" in metrics


# (mode, k, depth cap, node budget, max new tokens, router) -> (parameter, its one line)
BAD_OPTIONS = [
    (("route", 0, 0, 0, 8, "fused"), ("k", "k must be at least 1, not 0")),
    (("quote", 2.5, 0, 0, 8, "fused"), ("k", "k must be a whole number, not 2.5")),
    (("route", 3, -1, 0, 8, "fused"),
     ("max_depth", "the depth cap must be 0 (no limit) or more, not -1")),
    (("quote", 3, 0, -2, 8, "fused"),
     ("budget", "the node budget must be 0 (no limit) or more, not -2")),
    (("route", 3, 0, 0, 0, "fused"),
     ("max_new_tokens", "max new tokens must be 1 to 512 here, not 0")),
    (("quote", 3, 0, 0, 10**9, "fused"),
     ("max_new_tokens", "max new tokens must be 1 to 512 here, not 1000000000")),
    (("text", 3, 0, 0, -5, "fused"),
     ("max_new_tokens", "max new tokens must be 1 to 512 here, not -5")),
    (("route", 3, 0, 0, 8, "oracle"),
     ("router", "unknown router 'oracle'; choose one of fused, memory, lexical, dense")),
    (("telepathy", 3, 0, 0, 8, "fused"),
     ("mode", "unknown mode 'telepathy'; choose one of memory, text, full, flat, route, quote")),
]


@pytest.mark.parametrize("values, expected", BAD_OPTIONS)
def test_api_bad_option_values_get_one_line_and_store_nothing(client, explorer_server, tmp_path,
                                                              values, expected):
    """/ask with a bad option value, in every mode (route and quote too, where max new tokens
    is otherwise unused): the validator's one line naming the parameter and the value (the
    client puts its "failed validation" header above it), no traceback, nothing logged; the
    same values through /compare: one line (gr.Error)."""
    from gradio_client import handle_file

    _, rt = explorer_server
    md = tmp_path / "options-guide.md"
    md.write_text("# Options guide\n\n## Depth\n\nThe depth option sets how deep to go.\n")
    client.predict([handle_file(str(md))], api_name="/ingest")  # stored once, then reused
    doc = next(d for d in rt.library.list_documents() if d.file_name == md.name)
    n_logged = len(rt.library.list_queries(doc.id))
    mode, k, depth, budget, max_new, router = values
    param, line = expected
    with pytest.raises(Exception) as e:
        client.predict(str(doc.id), "How deep does it go?", mode, k, depth, budget, True, False,
                       max_new, router, api_name="/ask")
    message = str(e.value)
    assert "Traceback" not in message, message
    assert message.splitlines()[1:] == [f"- {param}: {line}"], message
    if router == "fused":  # /compare has no router input
        with pytest.raises(Exception) as e:
            client.predict(str(doc.id), "How deep does it go?", mode, "text", k, depth, budget,
                           True, max_new, api_name="/compare")
        assert str(e.value).strip() == line, str(e.value)
    assert len(rt.library.list_queries(doc.id)) == n_logged
