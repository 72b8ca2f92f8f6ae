"""The Ask tab: a question about one manual (or all), the answer streamed in, its cited nodes and
evidence lines beside their page, the routing tree, where the two routers disagree, the scored
nodes, the whole manual as an icicle and the manual's question history.

Layout, in a person's order: the question row (manual, question, longest answer, Ask), the two
choices most people make (mode, router) with the rest under "Advanced"; then the quote and the
model's answer beside the quote's page (rendered, the passage highlighted), the routing tree
under the answer, the cited sections, evidence lines and a section's text under the page; then,
folded under plain headings, the metrics, the disagreement view, the scored nodes, the icicle,
the figure data and the history. At 1440x900 the answer, its page and the top of the tree are
on the first screen (tests/app/test_app_browser.py checks it by bounding boxes). Gradio mounts a
fold's components only when it is opened; their values are kept meanwhile.

Bad option values (``option_problems``: the engine's own rules, each option checked alone, in
every mode) are refused by the /ask validator with one line under the input they concern, for
the page and for API clients alike; nothing is asked, stored or wiped. The event runs without
Gradio's preprocessing so that a value outside a component's range (k=0 from a script) reaches
the validator instead of failing with a bare "400 Bad Request".

Answers stream (do_ask is a generator over engine.ask.ask_stream, and so is the /ask API: a
gradio_client ``submit`` sees every step): the routing tree, its tables and the sections to be
read appear as soon as routing ends, then the answer token by token, then the final answer with
its metrics, history and evidence lines. The /ask outputs keep their shape; the evidence lines,
``degenerate`` and ``cut`` travel in the summary JSON, and to the page in the view State (shown by
the ``.then`` step). An output the engine labels degenerate is not shown as an answer: a notice
gives the engine's warning and the output, and a button asks the same question in text mode.
Memory mode (and the memory router) on a document still being written says so in a notice and
leaves the other outputs as they were.

Node selection: gr.Plot has no click events, so every view that shows nodes also shows them in
a table (gr.Dataframe); selecting a row opens that node's text and pages.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import chain

import gradio as gr

from app import examples
from app.answer_view import (MODE_HELP, ROUTER_CHOICES, ROUTER_LABELS,
                             clear_page, clear_view, cited_rows, evidence_summary, figures,
                             folds_of, generating_md, metric_rows, metrics_md, node_lines,
                             page_outputs, quote_outputs, route_from_log, route_views,
                             show_view)
from app.figures import figure_summary, manual_figure, pages_label, route_figure
from app.pages import Line
from app.route_tables import AGREEMENT_COLUMNS, CHANNEL_COLUMNS, ROUTE_COLUMNS, route_rows
from app.state import (ALL, ANSWER_CONCURRENCY, APP_MAX_NEW_TOKENS, AppState, MemoriesPending,
                       bind, doc_arg, doc_choices, doc_memory_line, empty_figure, node_view,
                       option_problems, options)
from engine.answer.events import AnswerReady, RouteReady, TokenChunk
from engine.answer.guard import DEGENERATE_REASONS
from engine.memory.aggregate import POLICIES

# route table columns (ROUTE_COLUMNS): status, title, pages, depth, score, three channels, prob,
# gate loops, doc, node, id
ROUTE_WIDTHS = ["7%", "23%", "7%", "5%", "7%", "10%", "7%", "7%", "6%", "7%", "4%", "5%", "5%"]
CITED_COLUMNS = ["#", "title", "pages", "doc", "node"]
EVIDENCE_COLUMNS = ["#", "score", "page", "section", "sentence", "doc", "node"]
HISTORY_COLUMNS = ["query", "asked (UTC)", "mode", "question", "answer", "TTFT ms", "selected"]
# The history table lists this many of a manual's newest questions: every answer refreshes it,
# so reading a long log whole there would cost time and memory growing with the log.
HISTORY_ROWS = 50
# The modes in one short line (the radio's info); the full help is under "Advanced".
MODE_LINE = "text and memory answer; route and quote only find (more under Advanced)."


# -- handlers ------------------------------------------------------------------------------------

def history_rows(s: AppState, doc) -> list[list]:
    if doc in (None, "", ALL):
        return []
    try:  # the picker takes typed values: not an id, no history
        doc_id = int(doc)
    except (TypeError, ValueError):
        return []
    rows = []
    for q in reversed(s.rt.library.list_queries(doc_id, newest=HISTORY_ROWS)):
        m = q.metrics or {}
        sel = sum(1 for r in (q.route or []) if r.get("status") == "selected")
        ans = " ".join((q.answer or "").split())
        rows.append([q.id, q.created_at.strftime("%Y-%m-%d %H:%M:%S"), q.mode, q.question,
                     ans if len(ans) <= 80 else ans[:79] + "…",
                     round(m.get("ttft_ms", 0) or 0), sel])
    return rows


def do_ask(s: AppState, doc, question, mode, k, max_depth, budget, gate, hier_pos,
           max_new_tokens, router="fused"):
    """Streams: the routing tree, icicle, route table and the sections to be read as soon
    as routing ends, then the answer as it is generated, then the final answer, metrics,
    history and (in the view State) the evidence lines and notices."""
    opts = options(s, mode, k, max_depth, budget, gate, hier_pos, max_new_tokens, router)
    events = s.run_ask_stream(doc, question, opts)
    try:
        first = next(events)  # the request's errors come before the first event
    except MemoriesPending as e:  # a notice; the last answer and tree stay as they were
        gr.Warning(str(e))
        yield (*[gr.skip()] * 12, {"notice": str(e)})
        return
    text, quoted = "", False
    for ev in chain([first], events):
        if isinstance(ev, RouteReady):
            fig, icicle, rows, summary, view = route_views(
                s, ev.route, None, doc, opts.mode, [c.id for c in ev.cited], None)
            summary["generating"] = opts.mode not in ("route", "quote")
            summary["quote"] = ev.quote.as_json() if ev.quote is not None else None
            quoted = ev.quote is not None or ev.not_covered
            yield ("", generating_md(opts, ev.route, ""), cited_rows(ev.cited), fig, icicle,
                   rows, summary, gr.skip(),
                   *quote_outputs(s, ev.quote, ev.not_covered, opts.mode), view)
        elif isinstance(ev, TokenChunk):
            text += ev.text
            yield (text, generating_md(opts, None, text), *[gr.skip()] * 11)
        elif isinstance(ev, AnswerReady):
            a = ev.answer  # a quote found after generation (memory, full, flat) comes now
            late = ((gr.skip(),) * 4 if quoted
                    else quote_outputs(s, a.quote, a.not_covered, a.mode))
            *out, view = final_outputs(s, a, doc)
            yield (*out, *late, view)


def final_outputs(s: AppState, a, doc):
    """The outputs of a finished answer (and its view State: notice, evidence lines)."""
    fig, icicle, rows, summary, view = figures(s, a, doc)
    degenerate = getattr(a, "degenerate", None)
    evidence = [asdict(e) for e in getattr(a, "evidence", None) or []]
    if degenerate:  # not presented as an answer: a notice, and the text mode offered
        why = DEGENERATE_REASONS.get(degenerate, str(degenerate))
        shown = f"(no answer: the {a.mode}-mode output is not usable, {why}; see the note)"
        raw = " ".join((a.text or "").split())
        view["notice"] = ((a.warning or "This output is not a usable answer.")
                          + (f" The model wrote: “{raw[:200]}{'…' if len(raw) > 200 else ''}”"
                             if raw else ""))
        view["offer_text"] = a.mode != "text"
    else:
        shown = a.text if a.text else ("(routing only: no answer generated)"
                                        if a.mode == "route" else
                                        "(the model generated nothing)")
        view["notice"] = a.warning or ""
        view["offer_text"] = False
    view["evidence"] = evidence
    view["evidence_note"] = evidence_summary(a, evidence, degenerate)
    quote = getattr(a, "quote", None)
    summary.update(degenerate=degenerate, cut=getattr(a, "cut", False),
                   cut_at=getattr(a, "cut_at", None), evidence=evidence,
                   answer=a.text, quote=quote.as_json() if quote is not None else None,
                   not_covered=getattr(a, "not_covered", False))
    return (shown, metrics_md(a), cited_rows(a), fig, icicle, rows, summary,
            history_rows(s, doc), view)


def question_problem(s: AppState, question) -> str | None:
    """What is wrong with a question the engine would refuse (the same limits), or None."""
    q = (question or "").strip()
    if not q:
        return "Type a question first."
    if len(q) > s.settings.max_question_chars:
        return (f"The question is {len(q)} characters long; the limit is "
                f"{s.settings.max_question_chars}.")
    return None


def validate_question(s: AppState, question, *others):
    """Gradio validator of the ask events: one line under the question box, no other output
    touched (the last answer, tree and evidence stay)."""
    problem = question_problem(s, question)
    return [gr.validate(problem is None, problem or ""),
            *[gr.validate(True, "") for _ in others]]


def validate_ask(s: AppState, doc, question, mode, k, max_depth, budget, gate, hier_pos,
                 max_new_tokens, router="fused"):
    """Gradio validator of /ask (the page and API clients): a bad question or option value is
    one line under its input (``option_problems``: the engine's rules, in every mode), and
    nothing is asked, stored or wiped."""
    problems = option_problems(s, mode, k, max_depth, budget, max_new_tokens, router)
    values = dict(zip(("mode", "k", "max_depth", "budget", "gate", "hier_pos",
                       "max_new_tokens", "router"),
                      (mode, k, max_depth, budget, gate, hier_pos, max_new_tokens, router)))
    return [gr.validate(True, ""), *validate_question(s, question)[:1],
            *[gr.validate(name not in problems, problems.get(name, "")) for name in values]]


def ask_refused(s: AppState, question, mode, k, max_depth, budget, gate, hier_pos,
                max_new_tokens, router="fused") -> bool:
    """Whether the validator refuses this request (then the last answer's views stay)."""
    return (question_problem(s, question) is not None
            or bool(option_problems(s, mode, k, max_depth, budget, max_new_tokens, router)))


def history_select(s: AppState, doc, evt: gr.SelectData):
    row = evt.row_value or []
    if not row or doc in (None, "", ALL):
        raise gr.Error("Select a question of the history.")
    rec = s.rt.library.get_query(int(row[0]))
    if rec is None or rec.doc_id != doc_arg(doc):
        raise gr.Error("That question is no longer in the log.")
    rows = [("from the log", f"query {rec.id}"), ("mode", rec.mode),
            *metric_rows(rec.metrics or {})]
    metrics = "| metric | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)
    logged = rec.settings or {}
    mode_value = rec.mode if rec.mode in MODE_HELP else gr.skip()
    router_value = logged.get("router") if logged.get("router") in ROUTER_LABELS else gr.skip()
    if not rec.route:
        msg = "This question was answered without routing."
        view = {"notice": "", "agreement": msg, "agreement_rows": [], "evidence": [],
                "evidence_note": "", "offer_text": False}
        return (rec.answer, metrics, [], empty_figure(msg), empty_figure(msg), [], {},
                rec.question, view, mode_value, router_value)
    route = route_from_log(rec.route, rec.settings)
    fig = route_figure(route, None, title=f"Routing tree of query {rec.id} (from the log)",
                       folds=folds_of(s, route))
    sel = [route.nodes[i] for i in route.selected]
    cited = [[j + 1, n.title, pages_label(n.page_start, n.page_end), n.doc_id, n.node_id]
             for j, n in enumerate(sel)]
    view = {"notice": "", "agreement": "The other router's selection is not kept in the "
            "query log: ask again to compare the routers.", "agreement_rows": [],
            "evidence": [], "evidence_note": "Evidence lines are not kept in the query log: "
            "select a cited section to read its page.", "offer_text": False}
    return (rec.answer, metrics, cited, fig, manual_figure(route), route_rows(route),
            figure_summary(fig), rec.question, view, mode_value, router_value)


def row_node(s: AppState, evt: gr.SelectData, doc_col: int, node_col: int):
    row = evt.row_value or []
    if len(row) <= max(doc_col, node_col) or row[doc_col] in (None, ""):
        return "The root of a library-wide route is not a stored node.", ""
    return node_view(s, row[doc_col], row[node_col])


def cited_select(s: AppState, view, evt: gr.SelectData):
    row = evt.row_value or []
    head, text = row_node(s, evt, 3, 4)
    if len(row) < 5 or row[3] in (None, ""):
        return head, text, gr.skip(), gr.skip(), gr.skip()
    return (head, text, *page_outputs(s, row[3], row[4], node_lines(view, row[3], row[4])))


def evidence_select(s: AppState, evt: gr.SelectData):
    row = evt.row_value or []
    doc_col, node_col = EVIDENCE_COLUMNS.index("doc"), EVIDENCE_COLUMNS.index("node")
    if len(row) <= node_col or row[doc_col] in (None, ""):
        return "Select an evidence line.", gr.skip(), gr.skip()
    page = row[EVIDENCE_COLUMNS.index("page")]
    line = Line(str(row[EVIDENCE_COLUMNS.index("sentence")]),
                int(page) if page not in (None, "") else None)
    return page_outputs(s, row[doc_col], row[node_col], [line])


def route_select(s: AppState, evt: gr.SelectData):
    return row_node(s, evt, ROUTE_COLUMNS.index("doc"), ROUTE_COLUMNS.index("node"))


def agreement_select(s: AppState, evt: gr.SelectData):
    return row_node(s, evt, AGREEMENT_COLUMNS.index("doc"), AGREEMENT_COLUMNS.index("node"))


# -- layout and events ---------------------------------------------------------------------------

@dataclass
class AskTab:
    """The Ask tab's components (``view``: the last answer's notice, evidence lines and
    disagreement view, shown by ``show_view``)."""
    doc: gr.Dropdown
    question: gr.Textbox
    ask_btn: gr.Button
    mem_line: gr.Markdown
    mode: gr.Radio
    router: gr.Radio
    max_new: gr.Number
    k: gr.Slider
    max_depth: gr.Number
    budget: gr.Number
    gate: gr.Checkbox
    hier_pos: gr.Checkbox
    notice: gr.Markdown
    text_btn: gr.Button
    view: gr.State
    quote_md: gr.Markdown
    answer: gr.Textbox
    metrics: gr.Markdown
    cited: gr.Dataframe
    evidence_note: gr.Markdown
    evidence_table: gr.Dataframe
    page_head: gr.Markdown
    page_image: gr.Image
    page_text: gr.Markdown
    route_plot: gr.Plot
    agree_md: gr.Markdown
    agree_table: gr.Dataframe
    route_table: gr.Dataframe
    node_head: gr.Markdown
    node_text: gr.Textbox
    manual_plot: gr.Plot
    summary: gr.JSON
    history: gr.Dataframe


def build(s: AppState) -> AskTab:
    """The tab's components, inside the caller's ``gr.Tabs``."""
    with gr.Tab("Ask", id="ask"):
        with gr.Row(equal_height=True):
            ask_doc = gr.Dropdown(label="Manual", choices=doc_choices(s, True), scale=3,
                                  elem_id="ask-doc", allow_custom_value=True)
            question = gr.Textbox(label="Question", scale=7, lines=1,
                                  max_length=s.settings.max_question_chars,
                                  placeholder="e.g. How do I declare an array parameter?",
                                  elem_id="ask-question")
            max_new = gr.Number(value=128, precision=0, scale=1, min_width=170,
                                label="Longest answer (tokens)",
                                info=f"1 to {APP_MAX_NEW_TOKENS}; then cut",
                                elem_id="ask-max-new")
            ask_btn = gr.Button("Ask", variant="primary", scale=1, min_width=100,
                                elem_id="ask-button")
        examples.build(s, ask_doc, question)  # example questions (app/examples.py), if any
        ask_mem_line = gr.Markdown(elem_id="ask-memory-status")
        # The settings a person changes in one row; the rest folded under "Advanced".
        with gr.Row():
            mode = gr.Radio(list(MODE_HELP), value="text", label="Answer from", scale=1,
                            info=MODE_LINE, elem_id="ask-mode")
            router = gr.Radio(ROUTER_CHOICES, value=s.settings.router,
                              label="Find sections by", scale=1,
                              info="How sections are scored: all evidence fused, or one "
                                   "kind alone.", elem_id="ask-router")
            with gr.Column(scale=0, min_width=160):
                with gr.Accordion("Advanced", open=False, elem_id="ask-advanced"):
                    gr.Markdown("**Answer modes.** " + "; ".join(
                        f"**{m}**: {h}" for m, h in MODE_HELP.items()) + ".")
                    k = gr.Slider(1, 8, value=3, step=1, label="Sections followed per level",
                                  info="At each level the router follows this many of a "
                                       "section's subsections (k); the rest are pruned.",
                                  elem_id="ask-k")
                    max_depth = gr.Number(value=0, precision=0,
                                          label="Deepest level (0 = no limit)",
                                          info="Routing stops at this depth of the tree.",
                                          elem_id="ask-depth")
                    budget = gr.Number(value=0, precision=0,
                                       label="Most sections selected (0 = no limit)",
                                       info="Routing stops once this many are selected.",
                                       elem_id="ask-budget")
                    gate = gr.Checkbox(value=True, label="Re-read memories (memory mode)",
                                       info="The model may pass over each memory slot "
                                            "a few extra times (the ArcAligner gate); "
                                            "the tree shows how many.",
                                       elem_id="ask-gate")
                    hier_pos = gr.Checkbox(value=False,
                                           label="Tell the model where each section sits "
                                                 "(memory mode)",
                                           info="Adds each section's place in the tree "
                                                "to its memory (HDT position codes).",
                                           elem_id="ask-hier-pos")
                    gr.Dropdown(list(POLICIES), value=s.rt.parts.aggregation,
                                label="How a section's memory sums up its subsections",
                                interactive=False,
                                info="Fixed when the memories are written (set "
                                     "H2MT_AGGREGATION, restart, upload again).")
        notice = gr.Markdown(elem_id="ask-notice")
        text_btn = gr.Button("Answer in text mode instead (from the sections' text)",
                             visible=False, size="sm", elem_id="text-instead-button")
        view = gr.State({})
        # A person's order: the manual's quote and the model's answer beside the quote's page,
        # the routing tree under the answer; the sections cited and the evidence lines under
        # the page they open; everything else folded under plain headings below.
        with gr.Row():
            with gr.Column(scale=3):
                quote_md = gr.Markdown(visible=False, elem_id="quote-view")
                answer = gr.Textbox(label="Answer (written by the model)", lines=2,
                                    max_lines=12, interactive=False, elem_id="answer-text")
                route_plot = gr.Plot(label="Routing tree", show_label=False,
                                     elem_id="route-plot")
                with gr.Accordion("How to read the routing tree", open=False):
                    gr.Markdown(
                        "Colour = the score the router ranked by (colour bar: the fused "
                        "score, or one kind of evidence alone). Bold solid edges: the "
                        "selected path. Grey dashed: pruned branches. ▽ +N: N nodes below "
                        "that the router never scored. ⟳n on a selected node: extra gate "
                        "loops (per layer in the hover). Hover a node for its title, pages "
                        "and each kind of evidence "
                        f"({', '.join(CHANNEL_COLUMNS)}): its own score and the best in its "
                        "branch; to read a node, select its row under \"Scored nodes\".")
            with gr.Column(scale=2):
                page_head = gr.Markdown("Select a cited node or an evidence line to "
                                        "see its page here.", elem_id="page-view-head")
                page_image = gr.Image(type="pil", format="png", interactive=False,
                                      label="Page", visible=False, height=620,
                                      elem_id="page-view-image")
                page_text = gr.Markdown(visible=False, max_height=620,
                                        elem_id="page-view-text")
                cited = gr.Dataframe(headers=CITED_COLUMNS, type="array",
                                     interactive=False, elem_id="cited-table", max_height=260,
                                     label="Cited sections (select one to read it and "
                                           "see its page)")
                evidence_note = gr.Markdown(elem_id="evidence-note")
                evidence_table = gr.Dataframe(
                    headers=EVIDENCE_COLUMNS, type="array", interactive=False,
                    elem_id="evidence-table", wrap=True, max_height=320,
                    column_widths=["5%", "8%", "7%", "20%", "50%", "5%", "5%"],
                    label="Evidence: sentences of the cited sections that support the "
                          "answer (select one to see it on its page)")
                ask_node_head = gr.Markdown(elem_id="ask-node-head")
                ask_node_text = gr.Textbox(label="Section text", lines=6, max_lines=20,
                                           interactive=False, elem_id="ask-node-text")
        with gr.Accordion("Metrics", open=False, elem_id="ask-metrics-fold"):
            metrics = gr.Markdown(elem_id="answer-metrics")
        with gr.Accordion("Fused router vs memory router: where they disagree", open=False,
                          elem_id="ask-agreement-fold"):
            agree_md = gr.Markdown(elem_id="router-agreement")
            agree_table = gr.Dataframe(headers=AGREEMENT_COLUMNS, type="array",
                                       interactive=False, max_height=260,
                                       label="Sections selected by only one of the two "
                                             "routers (select a row to read it)",
                                       elem_id="agreement-table")
        with gr.Accordion("Scored nodes", open=False, elem_id="ask-scored-fold"):
            # full width: thirteen columns (three of them evidence channels)
            route_table = gr.Dataframe(headers=ROUTE_COLUMNS, type="array",
                                       interactive=False, max_height=420,
                                       label="Every node the router scored (select a row "
                                             "to read it; evidence columns: best score in "
                                             "the node's branch)",
                                       column_widths=ROUTE_WIDTHS, elem_id="route-table")
        with gr.Accordion("The whole manual (icicle coloured by score)", open=False):
            manual_plot = gr.Plot(label="Manual", elem_id="manual-plot")
        with gr.Accordion("Figure data (JSON)", open=False):
            summary = gr.JSON(label="Routing tree summary", elem_id="route-summary")
        with gr.Accordion("History: questions asked about this manual", open=False,
                          elem_id="ask-history-fold"):
            history = gr.Dataframe(headers=HISTORY_COLUMNS, type="array", interactive=False,
                                   max_height=300, elem_id="history-table",
                                   label=f"The newest {HISTORY_ROWS} (select one to see its "
                                         "answer and tree again)")
    return AskTab(ask_doc, question, ask_btn, ask_mem_line, mode, router, max_new, k, max_depth,
                  budget, gate, hier_pos, notice, text_btn, view, quote_md, answer, metrics,
                  cited, evidence_note, evidence_table, page_head, page_image, page_text,
                  route_plot, agree_md, agree_table, route_table, ask_node_head, ask_node_text,
                  manual_plot, summary, history)


def wire(s: AppState, t: AskTab) -> None:
    """The tab's events."""
    ask_inputs = [t.doc, t.question, t.mode, t.k, t.max_depth, t.budget, t.gate, t.hier_pos,
                  t.max_new, t.router]
    ask_outputs = [t.answer, t.metrics, t.cited, t.route_plot, t.manual_plot, t.route_table,
                   t.summary, t.history, t.quote_md, t.page_head, t.page_image, t.page_text,
                   t.view]
    view_outputs = [t.notice, t.agree_md, t.agree_table, t.evidence_table, t.evidence_note,
                    t.text_btn]
    page_outputs_ = [t.page_head, t.page_image, t.page_text]
    answer, show, validate = bind(s, do_ask), bind(s, show_view), bind(s, validate_ask)
    for trigger in (t.ask_btn.click, t.question.submit):  # no stale comparison while asking
        # (a refused request keeps the view: the validator's line is all that changes)
        trigger(lambda _d, *a: clear_view() if not ask_refused(s, *a)
                else tuple(gr.skip() for _ in view_outputs), ask_inputs, view_outputs,
                queue=False, api_visibility="private", show_progress="hidden")
        trigger(lambda _d, *a: clear_page() if not ask_refused(s, *a)
                else tuple(gr.skip() for _ in page_outputs_), ask_inputs, page_outputs_,
                queue=False, api_visibility="private", show_progress="hidden")
    # preprocess=False: the values reach the validator as sent, so a value out of a
    # component's range (k=0 from a script) gets the validator's line naming it, not
    # Gradio's bare "400 Bad Request" (every input here is a plain string, number or bool)
    t.ask_btn.click(answer, ask_inputs, ask_outputs, concurrency_limit=ANSWER_CONCURRENCY,
                    concurrency_id="answer", api_name="ask", validator=validate,
                    preprocess=False).then(
        show, t.view, view_outputs, api_visibility="private", show_progress="hidden")
    t.question.submit(answer, ask_inputs, ask_outputs, concurrency_limit=ANSWER_CONCURRENCY,
                      concurrency_id="answer", api_visibility="private",
                      validator=validate, preprocess=False).then(
        show, t.view, view_outputs, api_visibility="private", show_progress="hidden")
    # a degenerate memory answer: one click asks the same question in text mode
    t.text_btn.click(lambda: "text", None, t.mode, queue=False, api_visibility="private").then(
        clear_view, None, view_outputs, queue=False, api_visibility="private",
        show_progress="hidden").then(
        answer, ask_inputs, ask_outputs, concurrency_limit=ANSWER_CONCURRENCY,
        concurrency_id="answer", api_visibility="private", validator=validate,
        preprocess=False).then(
        show, t.view, view_outputs, api_visibility="private", show_progress="hidden")
    t.doc.change(bind(s, history_rows), t.doc, t.history, api_visibility="private")
    t.doc.change(bind(s, doc_memory_line), t.doc, t.mem_line, api_visibility="private",
                 show_progress="hidden")
    t.history.select(bind(s, history_select), t.doc,
                     [t.answer, t.metrics, t.cited, t.route_plot, t.manual_plot, t.route_table,
                      t.summary, t.question, t.view, t.mode, t.router],
                     api_visibility="private").then(
        show, t.view, view_outputs, api_visibility="private", show_progress="hidden")
    t.cited.select(bind(s, cited_select), t.view,
                   [t.node_head, t.node_text, *page_outputs_], api_visibility="private",
                   concurrency_limit=2, concurrency_id="pages")
    t.evidence_table.select(bind(s, evidence_select), None, page_outputs_,
                            api_visibility="private", concurrency_limit=2,
                            concurrency_id="pages")
    t.route_table.select(bind(s, route_select), None, [t.node_head, t.node_text],
                         api_visibility="private")
    t.agree_table.select(bind(s, agreement_select), None, [t.node_head, t.node_text],
                         api_visibility="private")
