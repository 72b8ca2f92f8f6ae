"""The explorer's flow through its HTTP API (gradio_client): ingest, library, ask, node, compare.

Runs the real backbone on CPU; the app and its library are shared with the browser test.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest

from app.figures import figure_summary, visible_tree
from app.ui import route_from_log

pytestmark = pytest.mark.real_model

CORPUS_PDF = "camlidl-manual_no-outline.pdf"
QUESTION = "How are arrays passed between C and OCaml?"


@pytest.fixture(scope="module")
def client(explorer_server):
    from gradio_client import Client

    url, _ = explorer_server
    return Client(url, verbose=False)


def test_api_flow(client, explorer_server, shared_dir):
    from gradio_client import handle_file

    _, rt = explorer_server
    pdf = shared_dir / "corpus" / CORPUS_PDF
    status, table, lib_doc, ask_doc, cmp_doc = client.predict([handle_file(str(pdf))],
                                                              api_name="/ingest")
    assert "✓" in status and CORPUS_PDF in status, status
    doc = next(d for d in rt.library.list_documents() if d.file_name == CORPUS_PDF)
    assert doc.n_nodes > 10 and doc.pages == 26
    assert any(row[0] == doc.id for row in table["data"])

    n_docs = len(rt.library.list_documents())

    lib = client.predict(api_name="/library")
    assert any(row[0] == doc.id for row in lib[0]["data"])

    outputs = client.predict(str(doc.id), QUESTION, "text", 3, 0, 0, True, False, 32,
                             api_name="/ask")
    answer, metrics, cited, plot, icicle, route_rows, summary, history = outputs
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
    assert len(rt.library.list_documents()) == n_docs

    head, text = client.predict(cited["data"][0][3], cited["data"][0][4], api_name="/node")
    assert "p." in head and text

    out = client.predict(str(doc.id), QUESTION, "route", "text", 3, 0, 0, True, 16,
                         api_name="/compare")
    ans_a, met_a, plot_a, ans_b, met_b, plot_b, table = out
    assert ans_b.strip() and "prefill tokens" in met_b
    modes = [r[0] for r in table["data"]]
    assert modes == ["route", "text"]


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
