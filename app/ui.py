"""The manual explorer in the browser: library, ask (with the routing tree) and compare.

Layout and thin handlers only: every handler calls the engine (ingest, ask) or the library and
turns the result into component values. Figures live in app/figures.py, the tree layout in
app/layout.py. The engine never imports anything from here.

Node selection: gr.Plot has no click events, so every view that shows nodes also shows them in
a table (gr.Dataframe); selecting a row opens that node's text and pages.

Model use: indexing and answers of every mode share the one backbone and run side by side. The
ArcAligner's slot context is thread-local and its attachment reference-counted (engine/aligner.py),
so an answer that arms memory slots cannot leak them into a concurrent forward of the writer or of
another answer. Queues: indexing has its own queue (one file at a time), answers theirs (a few at
a time), so a long ingest never holds questions back.

Bad input: every file is checked (app/uploads.py, the engine's limits from Settings) and then
built by the engine; whatever is wrong with it comes back as one line in the indexing status, and
nothing of it is stored. Titles and text from manuals are shown as text, never as markup.
"""
from __future__ import annotations

import html
import logging
import re
from pathlib import Path

import gradio as gr
import plotly.graph_objects as go

from app.figures import (ROUTE_COLUMNS, figure_summary, manual_figure, pages_label,
                         route_figure, route_rows)
from app.uploads import ALLOWED_EXTS, UploadRejected, check_upload
from engine.memory.aggregate import POLICIES
from engine.answer.modes import MODES
from engine.ask import AskError, AskOptions, ask
from engine.ingest import ingest_file
from engine.routing.router import Route
from engine.runtime import Runtime
from engine.document.tree import DocumentError
from storage.errors import DocumentNotFound, MissingMemories, StaleMemories, StorageError

log = logging.getLogger(__name__)

ANSWER_CONCURRENCY = 2  # answers generated at once (indexing has its own queue of one)

LIBRARY_COLUMNS = ["id", "title", "file", "pages", "nodes", "depth", "tree source", "ingest s",
                   "added (UTC)"]
OUTLINE_COLUMNS = ["node", "title", "pages", "tokens", "kind"]
CITED_COLUMNS = ["#", "title", "pages", "doc", "node"]
HISTORY_COLUMNS = ["query", "asked (UTC)", "mode", "question", "answer", "TTFT ms", "selected"]
ALL = "all"
MODE_HELP = {
    "memory": "H2MT: the selected nodes' memory vectors are fed to the model (no raw text)",
    "text": "the selected nodes' raw text, deepest first, within the text budget",
    "full": "the manual's text from the start, cut to the context window (no routing)",
    "flat": "baseline: fixed-length segments, one memory each, no tree",
    "route": "routing only: show the tree, generate nothing",
}


def gpu(fn):
    """``spaces.GPU`` on a Hugging Face ZeroGPU Space; a no-op anywhere else."""
    try:
        import spaces  # noqa: PLC0415
    except ImportError:
        return fn
    return spaces.GPU(fn)


# -- small helpers -------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|>~])")


def md_text(text: str) -> str:
    """User/manual text shown inside Markdown: HTML escaped and Markdown syntax neutralised."""
    return _MD_SPECIAL.sub(r"\\\1", html.escape(" ".join((text or "").split()), quote=False))


def empty_figure(message: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=html.escape(message), showarrow=False, x=0.5, y=0.5,
                       xref="paper", yref="paper", font=dict(size=14, color="#6b7280"))
    fig.update_layout(height=220, xaxis=dict(visible=False), yaxis=dict(visible=False),
                      plot_bgcolor="white", paper_bgcolor="white",
                      margin=dict(l=10, r=10, t=10, b=10))
    return fig


def _opt_int(x) -> int | None:
    """Number inputs: blank or 0 mean "no limit"."""
    if x is None or x == "":
        return None
    v = int(float(x))
    return v if v > 0 else None


def _doc_arg(doc) -> int | str:
    if doc in (None, "", ALL):
        if doc in (None, ""):
            raise gr.Error("Choose a manual first (upload one in the Library tab).")
        return ALL
    try:
        return int(doc)
    except (TypeError, ValueError):
        raise gr.Error(f"not a manual id: {doc!r}") from None


def route_from_log(records: list[dict], settings: dict | None) -> Route:
    """A Route rebuilt from the query log (what ask() logged), for history views."""
    s = settings or {}
    return Route.from_records(records, k=int(s.get("k", 0) or 0), max_depth=s.get("max_depth"),
                              budget=s.get("budget"), temperature=float(s.get("temperature", 1.0)))


# -- the app -------------------------------------------------------------------------------------

def build_app(rt: Runtime, *, max_file_mb: float | None = None, max_pages: int | None = None
              ) -> gr.Blocks:
    """The app over ``rt``; limits come from ``rt.settings`` (the keywords override two)."""
    settings = rt.settings.with_(max_upload_mb=max_file_mb, max_pages=max_pages)
    max_file_mb, max_pages = settings.max_upload_mb, settings.max_pages
    trees: dict[int, object] = {}  # doc_id -> Tree, for the node views

    def tree_of(doc_id: int):
        if doc_id not in trees:
            trees[doc_id] = rt.library.get_tree(doc_id)
        return trees[doc_id]

    def forget(doc_id: int) -> None:
        """Drop every cached view of a deleted document (SQLite may reuse its id)."""
        trees.pop(doc_id, None)
        for name in ("docs", "flat"):
            cache = rt.cache.get(name, {})
            for key in [k for k in cache if k[0] == doc_id]:
                cache.pop(key, None)

    # -- library ---------------------------------------------------------------------------
    def library_rows() -> list[list]:
        return [[d.id, d.title, d.file_name, d.pages, d.n_nodes, d.depth, d.tree_source,
                 round((d.tree_ms + d.memory_ms) / 1e3, 1),
                 d.created_at.strftime("%Y-%m-%d %H:%M")]
                for d in rt.library.list_documents()]

    def doc_choices(with_all: bool) -> list[tuple[str, str]]:
        docs = rt.library.list_documents()
        out = [(f"#{d.id} {d.title} ({d.n_nodes} nodes)", str(d.id)) for d in docs]
        if with_all and len(docs) > 1:
            out.append(("All manuals (library-wide routing)", ALL))
        return out

    def pickers(value: str | None):
        """Updates for the three manual pickers (library, ask, compare)."""
        lib, asks = doc_choices(False), doc_choices(True)
        ids = {v for _, v in asks}
        v = value if value in ids else (lib[-1][1] if lib else None)
        return (gr.update(choices=lib, value=v), gr.update(choices=asks, value=v),
                gr.update(choices=asks, value=v))

    @gpu
    def upload(files, progress=gr.Progress()):
        paths = [Path(f) for f in (files or [])]
        messages, last = [], None
        n = len(paths)
        for i, path in enumerate(paths):
            name = path.name
            try:
                check_upload(path, settings)
            except UploadRejected as e:
                messages.append(f"✗ {e}")
                continue

            def report(done: int, total: int, i=i, name=name) -> None:
                progress((i + 0.1 + 0.85 * done / max(total, 1)) / n,
                         desc=f"{name}: memory {done}/{total} nodes")

            progress(i / n, desc=f"{name}: parsing and building the tree")
            try:
                r = ingest_file(path, rt, report, timeout_s=settings.request_timeout_s)
            except DocumentError as e:
                msg = str(e)
                messages.append(f"✗ {msg if msg.startswith(name) else f'{name}: {msg}'}")
                continue
            except StorageError as e:
                messages.append(f"✗ {name}: not stored ({e})")
                continue
            except Exception as e:  # a bug, not the user's file: say so, keep the other files
                log.exception("ingest of %s failed", name)
                messages.append(f"✗ {name}: could not be indexed (internal error "
                                f"{type(e).__name__}); nothing was stored")
                continue
            progress((i + 1) / n, desc=f"{name}: stored")
            if not r.reused:
                forget(r.doc_id)
            last = str(r.doc_id)
            verb = "already in the library" if r.reused else "indexed"
            messages.append(
                f"✓ {name} {verb} as #{r.doc_id}: {r.nodes} nodes ({r.leaves} leaves), depth "
                f"{r.depth}, {r.pages} pages, tree from {r.source} "
                f"(tree {r.tree_ms / 1e3:.1f} s, memories {r.memory_ms / 1e3:.1f} s)")
        msg = "\n".join(messages) or "No file chosen."
        return (msg, library_rows(), *pickers(last))

    def refresh(current=None):
        return (library_rows(), *pickers(current))

    def outline(doc):
        if doc in (None, "", ALL):
            return [], "", ""
        try:
            tree = tree_of(int(doc))
        except DocumentNotFound:
            raise gr.Error(f"manual #{doc} no longer exists") from None
        rows = [[n.id, ("\u00a0\u00a0\u00a0" * n.depth) + (n.title or _preview(n.text)),
                 pages_label(n.page_start, n.page_end), n.tokens, n.kind]
                for n in tree.preorder()]
        return rows, "Select a row of the outline to read that node.", ""

    def node_view(doc_id, node_id):
        """Header (Markdown) and text of one stored node."""
        try:
            tree = tree_of(int(doc_id))
            n = tree.node(int(node_id))
        except (DocumentNotFound, KeyError, TypeError, ValueError):
            return "That node is not in the library any more.", ""
        path = " › ".join(md_text(p.title or _preview(p.text)) for p in tree.path(n.id)[1:-1])
        title = md_text(n.title or _preview(n.text)) or "(untitled)"
        head = (f"**{title}** — {pages_label(n.page_start, n.page_end)}, depth {n.depth}, "
                f"{n.tokens} tokens, node {n.id} of manual #{int(doc_id)}")
        if path:
            head += f"  \nin: {path}"
        return head, n.text or "(this node has only its heading; its text is in its children)"

    def outline_select(doc, evt: gr.SelectData):
        row = evt.row_value or []
        if not row or doc in (None, "", ALL):
            return "", ""
        return node_view(int(doc), row[0])

    def library_select(evt: gr.SelectData):
        row = evt.row_value or []
        return str(row[0]) if row else gr.update()

    def node_api(doc_id: int, node_id: int) -> tuple[str, str]:
        """A stored node's header (Markdown) and text."""
        return node_view(doc_id, node_id)

    def delete(doc):
        if doc in (None, "", ALL):
            raise gr.Error("Choose a manual to delete.")
        try:
            rt.library.delete_document(int(doc))
        except DocumentNotFound:
            raise gr.Error(f"manual #{doc} no longer exists") from None
        forget(int(doc))
        return (f"Deleted manual #{doc} (its logged questions stay, without a manual).",
                library_rows(), *pickers(None), [], "", "")

    # -- ask -------------------------------------------------------------------------------
    def options(mode, k, max_depth, budget, gate, hier_pos, max_new_tokens) -> AskOptions:
        return AskOptions(mode=mode or "memory", k=int(k or 3), max_depth=_opt_int(max_depth),
                          budget=_opt_int(budget), gate=bool(gate), hier_pos=bool(hier_pos),
                          max_new_tokens=int(max_new_tokens or 64))

    @gpu
    def run_ask(doc, question, opts: AskOptions):
        target = _doc_arg(doc)
        try:
            return ask(rt, target, question, opts)
        except AskError as e:
            raise gr.Error(str(e)) from None
        except (StaleMemories, MissingMemories):
            raise gr.Error("This manual's memories were written by another model or "
                           "aggregation policy: upload the file again to rewrite them.") from None
        except StorageError as e:
            raise gr.Error(str(e)) from None

    def metrics_md(a) -> str:
        m = a.metrics
        rows = [("mode", a.mode), ("TTFT", f"{m.ttft_ms:.0f} ms"), ("total", f"{m.total_ms:.0f} ms"),
                ("routing", f"{m.route_ms:.0f} ms"), ("prefill tokens", m.prefill_tokens),
                ("generated tokens", m.generated_tokens), ("peak memory", f"{m.peak_mem_mb:.0f} MB")]
        if a.route is not None:
            rows.insert(1, ("selected nodes", f"{len(a.route.selected)} (stop: {a.route.stop_reason})"))
        return "| metric | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)

    def cited_rows(a) -> list[list]:
        return [[i + 1, c.title or "(untitled)", pages_label(c.page_start, c.page_end), c.doc_id,
                 c.node_id] for i, c in enumerate(a.cited)]

    def figures(a):
        if a.route is None:
            msg = f"The {a.mode} mode does not route: no tree to show."
            return empty_figure(msg), empty_figure(msg), [], {"mode": a.mode, "route": None}
        fig = route_figure(a.route, a)
        summary = figure_summary(fig)
        summary.update(mode=a.mode, selected=list(a.route.selected),
                       cited=[c.id for c in a.cited])
        return fig, manual_figure(a.route), route_rows(a.route, a), summary

    def history_rows(doc) -> list[list]:
        if doc in (None, "", ALL):
            return []
        rows = []
        for q in reversed(rt.library.list_queries(int(doc))):
            m = q.metrics or {}
            sel = sum(1 for r in (q.route or []) if r.get("status") == "selected")
            ans = " ".join((q.answer or "").split())
            rows.append([q.id, q.created_at.strftime("%Y-%m-%d %H:%M:%S"), q.mode, q.question,
                         ans if len(ans) <= 80 else ans[:79] + "…",
                         round(m.get("ttft_ms", 0) or 0), sel])
        return rows

    def do_ask(doc, question, mode, k, max_depth, budget, gate, hier_pos, max_new_tokens):
        a = run_ask(doc, question, options(mode, k, max_depth, budget, gate, hier_pos,
                                           max_new_tokens))
        fig, icicle, rows, summary = figures(a)
        text = a.text if a.text else ("(routing only: no answer generated)" if a.mode == "route"
                                      else "(the model generated nothing)")
        return (text, metrics_md(a), cited_rows(a), fig, icicle, rows, summary,
                history_rows(doc))

    def history_select(doc, evt: gr.SelectData):
        row = evt.row_value or []
        if not row or doc in (None, "", ALL):
            raise gr.Error("Select a question of the history.")
        rec = next((q for q in rt.library.list_queries(int(doc)) if q.id == row[0]), None)
        if rec is None:
            raise gr.Error("That question is no longer in the log.")
        m = rec.metrics or {}
        metrics = ("| metric | value |\n|---|---|\n" + f"| from the log | query {rec.id}, {rec.mode} |\n"
                   + "\n".join(f"| {k} | {v} |" for k, v in m.items()))
        if not rec.route:
            msg = "This question was answered without routing."
            return rec.answer, metrics, [], empty_figure(msg), empty_figure(msg), [], {}, rec.question
        route = route_from_log(rec.route, rec.settings)
        fig = route_figure(route, None, title=f"Routing tree of query {rec.id} (from the log)")
        sel = [route.nodes[i] for i in route.selected]
        cited = [[j + 1, n.title, pages_label(n.page_start, n.page_end), n.doc_id, n.node_id]
                 for j, n in enumerate(sel)]
        return (rec.answer, metrics, cited, fig, manual_figure(route), route_rows(route),
                figure_summary(fig), rec.question)

    def row_node(evt: gr.SelectData, doc_col: int, node_col: int):
        row = evt.row_value or []
        if len(row) <= max(doc_col, node_col) or row[doc_col] in (None, ""):
            return "The root of a library-wide route is not a stored node.", ""
        return node_view(row[doc_col], row[node_col])

    def cited_select(evt: gr.SelectData):
        return row_node(evt, 3, 4)

    def route_select(evt: gr.SelectData):
        return row_node(evt, ROUTE_COLUMNS.index("doc"), ROUTE_COLUMNS.index("node"))

    # -- compare ---------------------------------------------------------------------------
    def do_compare(doc, question, mode_a, mode_b, k, max_depth, budget, gate, max_new_tokens):
        out = []
        table = []
        for mode in (mode_a, mode_b):
            a = run_ask(doc, question, options(mode, k, max_depth, budget, gate, False,
                                               max_new_tokens))
            fig, _, _, summary = figures(a)
            out += [a.text or "(nothing generated)", metrics_md(a), fig]
            m = a.metrics
            table.append([mode, round(m.ttft_ms), round(m.total_ms), m.prefill_tokens,
                          m.generated_tokens, round(m.peak_mem_mb, 1),
                          len(a.route.selected) if a.route else 0, len(a.cited)])
        return (*out, table)

    # -- layout ----------------------------------------------------------------------------
    with gr.Blocks(title="Manual explorer", analytics_enabled=False) as demo:
        gr.Markdown(
            "# Manual explorer\n"
            "Upload technical manuals; each becomes a section tree with one memory vector per "
            "node (H2MT). Ask a question and see which branches the router followed, which it "
            "pruned, and which nodes the answer came from.")
        with gr.Tabs():
            with gr.Tab("Library", id="library"):
                files = gr.File(file_count="multiple", file_types=list(ALLOWED_EXTS),
                                label=f"Upload manuals (PDF, Markdown, HTML, text; several at "
                                      f"once; up to {max_file_mb:g} MB and {max_pages} pages each)",
                                elem_id="upload-files")
                status = gr.Textbox(label="Indexing", lines=3, interactive=False,
                                    elem_id="index-status")
                lib_table = gr.Dataframe(headers=LIBRARY_COLUMNS, value=library_rows(),
                                         label="Library", interactive=False, type="array",
                                         elem_id="library-table")
                with gr.Row():
                    lib_doc = gr.Dropdown(label="Manual", choices=doc_choices(False),
                                          value=None, scale=4, elem_id="library-doc")
                    delete_btn = gr.Button("Delete this manual", variant="stop", scale=1,
                                           elem_id="delete-button")
                with gr.Row():
                    with gr.Column(scale=3):
                        outline_table = gr.Dataframe(headers=OUTLINE_COLUMNS, label="Outline "
                                                     "(select a row to read the node)",
                                                     interactive=False, type="array",
                                                     max_height=520, elem_id="outline-table",
                                                     column_widths=["9%", "60%", "15%", "8%",
                                                                    "8%"])
                    with gr.Column(scale=2):
                        lib_node_head = gr.Markdown(elem_id="library-node-head")
                        lib_node_text = gr.Textbox(label="Node text", lines=18,
                                                   interactive=False, elem_id="library-node-text")

            with gr.Tab("Ask", id="ask"):
                with gr.Row():
                    ask_doc = gr.Dropdown(label="Manual", choices=doc_choices(True), scale=2,
                                          elem_id="ask-doc")
                    question = gr.Textbox(label="Question", scale=5, lines=1,
                                          max_length=settings.max_question_chars,
                                          placeholder="e.g. How do I declare an array parameter?",
                                          elem_id="ask-question")
                    ask_btn = gr.Button("Ask", variant="primary", scale=1, elem_id="ask-button")
                with gr.Accordion("Settings", open=True):
                    with gr.Row():
                        mode = gr.Radio(list(MODES), value="memory", label="Mode",
                                        info="; ".join(f"{m}: {h}" for m, h in MODE_HELP.items()),
                                        elem_id="ask-mode")
                    with gr.Row():
                        k = gr.Slider(1, 8, value=3, step=1, label="k (children kept per parent)",
                                      elem_id="ask-k")
                        max_depth = gr.Number(value=0, precision=0, minimum=0,
                                              label="Depth cap (0 = none)", elem_id="ask-depth")
                        budget = gr.Number(value=0, precision=0, minimum=0,
                                           label="Node budget (0 = none)", elem_id="ask-budget")
                        max_new = gr.Number(value=64, precision=0, minimum=1, maximum=512,
                                            label="Max new tokens", elem_id="ask-max-new")
                    with gr.Row():
                        gate = gr.Checkbox(value=True, label="Gate on (extra loops on memory slots)",
                                           elem_id="ask-gate")
                        hier_pos = gr.Checkbox(value=False, label="Hierarchical positions "
                                               "(memory mode)", elem_id="ask-hier-pos")
                        gr.Dropdown(list(POLICIES), value=rt.parts.aggregation,
                                    label="Aggregation policy (display only)", interactive=False,
                                    info="Fixed when memories are written: changing it needs "
                                         "re-indexing every manual (set H2MT_AGGREGATION, "
                                         "restart, upload again).")
                with gr.Row():
                    with gr.Column(scale=3):
                        answer = gr.Textbox(label="Answer", lines=4, interactive=False,
                                            elem_id="answer-text")
                        cited = gr.Dataframe(headers=CITED_COLUMNS, type="array",
                                             interactive=False, elem_id="cited-table",
                                             label="Cited nodes (select a row to read it)")
                    with gr.Column(scale=2):
                        metrics = gr.Markdown(elem_id="answer-metrics")
                gr.Markdown(
                    "**Routing tree.** Colour = routing score (colour bar). Bold solid edges: the "
                    "selected path. Grey dashed: pruned branches. ▽ +N: N nodes below that the "
                    "router never scored. ⟳n on a selected node: extra gate loops (per layer in "
                    "the hover). Hover a node for its title, pages, score and in-parent "
                    "probability; to read a node, select its row in the table below the tree.")
                route_plot = gr.Plot(label="Routing tree", elem_id="route-plot")
                with gr.Row():
                    with gr.Column(scale=3):
                        route_table = gr.Dataframe(headers=ROUTE_COLUMNS, type="array",
                                                   interactive=False, max_height=420,
                                                   label="Scored nodes (select a row to read it)",
                                                   elem_id="route-table")
                    with gr.Column(scale=2):
                        ask_node_head = gr.Markdown(elem_id="ask-node-head")
                        ask_node_text = gr.Textbox(label="Node text", lines=14, interactive=False,
                                                   elem_id="ask-node-text")
                with gr.Accordion("The whole manual (icicle coloured by score)", open=False):
                    manual_plot = gr.Plot(label="Manual", elem_id="manual-plot")
                with gr.Accordion("Figure data (JSON)", open=False):
                    summary = gr.JSON(label="Routing tree summary", elem_id="route-summary")
                history = gr.Dataframe(headers=HISTORY_COLUMNS, type="array", interactive=False,
                                       max_height=300, elem_id="history-table",
                                       label="Questions asked about this manual (select one to "
                                             "see its answer and tree again)")

            with gr.Tab("Compare", id="compare"):
                gr.Markdown("Run the same question in two modes and compare answers, time to "
                            "first token, prefill tokens, peak memory and routing trees.")
                with gr.Row():
                    cmp_doc = gr.Dropdown(label="Manual", choices=doc_choices(True), scale=2,
                                          elem_id="compare-doc")
                    cmp_q = gr.Textbox(label="Question", scale=5, elem_id="compare-question")
                    cmp_btn = gr.Button("Compare", variant="primary", scale=1,
                                        elem_id="compare-button")
                with gr.Row():
                    mode_a = gr.Dropdown(list(MODES), value="memory", label="Mode A",
                                         elem_id="compare-mode-a")
                    mode_b = gr.Dropdown(list(MODES), value="text", label="Mode B",
                                         elem_id="compare-mode-b")
                    cmp_k = gr.Slider(1, 8, value=3, step=1, label="k")
                    cmp_depth = gr.Number(value=0, precision=0, minimum=0, label="Depth cap (0 = none)")
                    cmp_budget = gr.Number(value=0, precision=0, minimum=0, label="Budget (0 = none)")
                    cmp_gate = gr.Checkbox(value=True, label="Gate on")
                    cmp_new = gr.Number(value=64, precision=0, minimum=1, maximum=512,
                                        label="Max new tokens", elem_id="compare-max-new")
                cmp_table = gr.Dataframe(headers=["mode", "TTFT ms", "total ms", "prefill tokens",
                                                  "generated", "peak MB", "selected", "cited"],
                                         type="array", interactive=False, label="Side by side",
                                         elem_id="compare-table")
                with gr.Row():
                    with gr.Column():
                        ans_a = gr.Textbox(label="Answer A", lines=4, interactive=False,
                                           elem_id="compare-answer-a")
                        met_a = gr.Markdown()
                        plot_a = gr.Plot(label="Tree A", elem_id="compare-plot-a")
                    with gr.Column():
                        ans_b = gr.Textbox(label="Answer B", lines=4, interactive=False,
                                           elem_id="compare-answer-b")
                        met_b = gr.Markdown()
                        plot_b = gr.Plot(label="Tree B", elem_id="compare-plot-b")

        # -- events ----------------------------------------------------------------------------
        pickers_out = [lib_doc, ask_doc, cmp_doc]
        files.upload(upload, files, [status, lib_table, *pickers_out], api_name="ingest",
                     concurrency_limit=1, concurrency_id="indexing")
        lib_doc.change(outline, lib_doc, [outline_table, lib_node_head, lib_node_text],
                       api_name="outline")
        outline_table.select(outline_select, lib_doc, [lib_node_head, lib_node_text],
                             api_visibility="private")
        lib_table.select(library_select, None, lib_doc, api_visibility="private")
        delete_btn.click(delete, lib_doc, [status, lib_table, *pickers_out, outline_table,
                                           lib_node_head, lib_node_text],
                         api_name="delete_manual")
        demo.load(refresh, None, [lib_table, *pickers_out], api_name="library")

        ask_inputs = [ask_doc, question, mode, k, max_depth, budget, gate, hier_pos, max_new]
        ask_outputs = [answer, metrics, cited, route_plot, manual_plot, route_table, summary,
                       history]
        ask_btn.click(do_ask, ask_inputs, ask_outputs, concurrency_limit=ANSWER_CONCURRENCY,
                      concurrency_id="answer", api_name="ask")
        question.submit(do_ask, ask_inputs, ask_outputs, concurrency_limit=ANSWER_CONCURRENCY,
                        concurrency_id="answer", api_visibility="private")
        ask_doc.change(history_rows, ask_doc, history, api_visibility="private")
        history.select(history_select, ask_doc, [answer, metrics, cited, route_plot, manual_plot,
                                                 route_table, summary, question],
                       api_visibility="private")
        cited.select(cited_select, None, [ask_node_head, ask_node_text], api_visibility="private")
        route_table.select(route_select, None, [ask_node_head, ask_node_text],
                           api_visibility="private")
        gr.api(node_api, api_name="node")

        cmp_btn.click(do_compare, [cmp_doc, cmp_q, mode_a, mode_b, cmp_k, cmp_depth, cmp_budget,
                                   cmp_gate, cmp_new],
                      [ans_a, met_a, plot_a, ans_b, met_b, plot_b, cmp_table],
                      concurrency_limit=ANSWER_CONCURRENCY, concurrency_id="answer",
                      api_name="compare")
    return demo


def _preview(text: str, n: int = 60) -> str:
    one = " ".join((text or "").split())
    return one if len(one) <= n else one[: n - 1] + "…"
