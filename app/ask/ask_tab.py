"""The Ask tab: a question about one manual (or all), the answer streamed in, its cited nodes and
evidence lines beside their page, the routing tree, where the two routers disagree, the scored
nodes, the whole manual as an icicle and the manual's question history.

This module is the tab's layout and events; its handlers are in app/ask/ask_handlers.py (asking,
selecting a row) and app/ask/ask_history.py (the history), each taking one parsed request
(app/shared/ask_request.py) and returning updates keyed by component.

Layout, in a person's order: the question row (manual, question, longest answer, Ask), the two
choices most people make (mode, router) with the rest under "Advanced"; then the quote and the
model's answer beside the quote's page (rendered, the passage highlighted), the routing tree
under the answer, the cited sections, evidence lines and a section's text under the page; then,
folded under plain headings, the metrics, the disagreement view, the scored nodes, the icicle,
the figure data and the history. At 1440x900 the answer, its page and the top of the tree are
on the first screen (tests/app/test_app_browser.py checks it by bounding boxes). Gradio mounts a
fold's components only when it is opened; their values are kept meanwhile.

Bad option values (``AskRequest.problems``: the engine's own rules, checked once, in every
mode) are refused by the /ask validator with one line under the input they
concern, for the page and for API clients alike; nothing is asked, stored or wiped. The event
runs without Gradio's preprocessing so that a value outside a component's range (k=0 from a
script) reaches the validator instead of failing with a bare "400 Bad Request".

Node selection: gr.Plot has no click events, so every view that shows nodes also shows them in
a table (gr.Dataframe); selecting a row opens that node's text and pages.
"""
from __future__ import annotations

import gradio as gr

from app.ask.ask_components import AskInputs, AskTab
from app.ask.ask_handlers import (CITED_COLUMNS, EVIDENCE_COLUMNS,
                                  agreement_select, cited_select, clear_before_ask, do_ask,
                                  evidence_select, passage_select, route_select, show_view,
                                  validate_ask)
from app.ask.ask_history import HISTORY_COLUMNS, HISTORY_ROWS, history_rows, history_select
from app.ask.reader_view import reader_line, reader_markdown
from app.shared import examples
from app.shared.ask_request import APP_MAX_NEW_TOKENS, AskRequest
from app.shared.binding import bind
from app.shared.lines import PAGE_HINT, READING
from app.shared.option_controls import control, read_by
from app.shared.memory_lines import doc_memory_line
from app.shared.state import AppState, doc_choices
from app.views import feedback
from app.views.passages_view import OPEN_JS
from app.views.answer_view import MODE_CHOICES, MODE_HELP, ROUTER_CHOICES
from app.views.route_tables import AGREEMENT_COLUMNS, CHANNEL_COLUMNS, ROUTE_COLUMNS
from app.views.view_state import ViewState
from engine.answer.modes import MODES
from engine.answer.option_table import ASK, offered
from engine.memory.aggregate import POLICIES
from engine.routing.fused import ROUTER_WORDS

# route table columns (ROUTE_COLUMNS): status, title, pages, depth, score, three channels, prob,
# gate loops, doc, node, id
ROUTE_WIDTHS = ["7%", "23%", "7%", "5%", "7%", "10%", "7%", "7%", "6%", "7%", "4%", "5%", "5%"]
# The choices' help lines, shown on hover (app/ui.APP_CSS): each choice under the paper's name.
# The Advanced controls' element ids of before (the browser tests find them by these).
ADVANCED = {"k": dict(elem_id="ask-k"), "max_depth": dict(elem_id="ask-depth")}
MODE_INFO = "; ".join(f"{m} mode: {h}" for m, h in MODE_HELP.items()) + "."
ROUTER_INFO = "; ".join(paper for _, paper in ROUTER_WORDS.values()) + "."
# The "text mode instead" button asks through the Ask button's own click (as the example questions
# do, app/shared/examples.py), once the mode shows "text": the same validation, clearing and
# streaming, one chain of events.
ASK_CLICK_JS = "() => { document.querySelector('#ask-button')?.click(); }"


def build(s: AppState) -> AskTab:
    """The tab's components, inside the caller's ``gr.Tabs``."""
    with gr.Tab("Ask", id="ask", elem_id="ask-tab"):
        with gr.Row(equal_height=True):
            ask_doc = gr.Dropdown(label="Manual", choices=doc_choices(s, True), scale=3,
                                  elem_id="ask-doc", allow_custom_value=True)
            question = gr.Textbox(label="Question", scale=7, lines=1,
                                  max_length=s.settings.max_question_chars,
                                  placeholder="e.g. How do I declare an array parameter?",
                                  elem_id="ask-question")
            inputs = {"doc": ask_doc, "question": question}
            inputs["max_new_tokens"] = control(
                "max_new_tokens", "ask", scale=1, min_width=230,
                info=f"1 to {APP_MAX_NEW_TOKENS}; a longer answer is cut "
                     f"there.{read_by('max_new_tokens')}", elem_id="ask-max-new")
            ask_btn = gr.Button("Ask", variant="primary", scale=1, min_width=100,
                                elem_id="ask-button")
        examples.build(s, ask_doc, question)  # example questions (app/shared/examples.py), if any
        with gr.Row():  # one line's height: the manual's memories and the reader side by side
            with gr.Column(scale=3):  # the wider: its line is the longer
                ask_mem_line = gr.Markdown(elem_id="ask-memory-status")
            with gr.Column(scale=2):
                reader_line = gr.Markdown(reader_markdown(s.rt), elem_id="ask-reader")
        # The settings a person changes in one row; the rest folded under "Advanced".
        with gr.Row():
            inputs["mode"] = control("mode", "ask", choices=MODE_CHOICES, scale=3,
                                     info=MODE_INFO)
            inputs["router"] = control("router", "ask", choices=ROUTER_CHOICES,
                                       value=s.settings.router, scale=2, info=ROUTER_INFO)
            with gr.Column(scale=0, min_width=160):
                with gr.Accordion("Advanced", open=False, elem_id="ask-advanced"):
                    gr.Markdown(choices_help(), elem_id="ask-choices-help")
                    for o in offered(ASK):  # the rest of the table's Ask options
                        if o.name not in inputs:
                            inputs[o.name] = control(o, "ask", **ADVANCED.get(o.name, {}))
                    gr.Dropdown(list(POLICIES), value=s.rt.parts.aggregation,
                                label="How a section's memory sums up its subsections",
                                interactive=False,
                                info="Fixed when the memories are written (set "
                                     "H2MT_AGGREGATION, restart, upload again).")
        notice = gr.Markdown(elem_id="ask-notice")
        text_btn = gr.Button("Answer in text mode instead (from the sections' text)",
                             visible=False, size="sm", elem_id="text-instead-button")
        view = gr.State(ViewState())
        # A person's order: the manual's quote and the model's answer beside the quote's page,
        # the routing tree under the answer; the sections cited and the evidence lines under
        # the page they open; everything else folded under plain headings below.
        with gr.Row():
            with gr.Column(scale=3):
                quote_md = gr.Markdown(visible=False, elem_id="quote-view")
                key_md = gr.Markdown(visible=False, elem_id="key-line")
                answer_fold = gr.Markdown(visible=False, elem_id="answer-fold")
                # the box, not the Textbox, is hidden for a folded answer: /ask's first output
                # stays the answer's text for API clients (README "API")
                with gr.Column(elem_id="answer-box") as answer_box:
                    answer = gr.Textbox(label=READING,
                                        lines=1, max_lines=12, interactive=False,
                                        elem_id="answer-text")
                # the quote and the two passages after it, readable, in rank order; a click
                # on one shows it on its page (app/views/passages_view.py)
                passages = gr.HTML("", elem_id="passages", visible=False, padding=False,
                                   js_on_load=OPEN_JS)
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
                bar = feedback.build_bar()  # after the answer and how it was found
            with gr.Column(scale=2):
                page_head = gr.Markdown(PAGE_HINT, elem_id="page-view-head")
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
                    column_widths=["7%", "11%", "11%", "19%", "37%", "7%", "8%"],
                    label="Evidence: sentences of the cited sections that support the "
                          "answer (select one to see it on its page)")
                ask_node_head = gr.Markdown(elem_id="ask-node-head")
                ask_node_text = gr.Textbox(label="Section text", lines=6, max_lines=20,
                                           interactive=False, elem_id="ask-node-text")
        with gr.Accordion("Metrics", open=False, elem_id="ask-metrics-fold"):
            metrics = gr.Markdown(elem_id="answer-metrics")
        with gr.Accordion("All clues vs the sections' memories: where they disagree",
                          open=False,
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
    return AskTab(
        inputs=AskInputs(inputs),
        ask_btn=ask_btn, mem_line=ask_mem_line, reader_line=reader_line, notice=notice,
        text_btn=text_btn, view=view, quote_md=quote_md, passages=passages,
        key_md=key_md, answer_fold=answer_fold, answer_box=answer_box, answer=answer,
        metrics=metrics, cited=cited,
        evidence_note=evidence_note, evidence_table=evidence_table, page_head=page_head,
        page_image=page_image, page_text=page_text, route_plot=route_plot, agree_md=agree_md,
        agree_table=agree_table, route_table=route_table, node_head=ask_node_head,
        node_text=ask_node_text, manual_plot=manual_plot, summary=summary, history=history,
        feedback=bar)


def choices_help() -> str:
    """Each answer and router choice with the paper's name for it and what it does."""
    modes = "; ".join(f"**{MODES[m].label}** ({m} mode): {h}" for m, h in MODE_HELP.items())
    routers = "; ".join(f"**{phrase}** ({paper})" for phrase, paper in ROUTER_WORDS.values())
    return (f"**What you get.** {modes}.\n\n**Find sections by** (how sections are scored: "
            f"every clue together, or one alone). {routers}.")


def wire(s: AppState, t: AskTab) -> None:
    """The tab's events."""
    ask_inputs = t.inputs.in_order()
    asked = [t.ask_btn.click, t.inputs.question.submit]
    private = dict(api_visibility="private", show_progress="hidden")
    # no stale comparison while asking (a refused request keeps the last answer's notes: the
    # validator's line is all that changes)
    gr.on(asked, bind(s, clear_before_ask, t, request=AskRequest), ask_inputs,
          [*t.view_outputs(), *t.page_outputs(), *t.feedback.outputs()], queue=False,
          **private)
    # preprocess=False: the values reach the validator as sent, so a value out of a
    # component's range (k=0 from a script) gets the validator's line naming it, not
    # Gradio's bare "400 Bad Request" (every input here is a plain string, number or bool)
    answered = gr.on(
        asked, bind(s, do_ask, t, request=AskRequest), ask_inputs, t.answer_outputs(),
        concurrency_limit=s.settings.max_asks_in_flight, concurrency_id="answer",
        api_name="ask",
        validator=bind(s, validate_ask, t, request=AskRequest), preprocess=False).then(
        bind(s, show_view, t), t.view, t.view_outputs(), **private).then(
        bind(s, reader_line), None, t.reader_line, **private)
    feedback.wire_box(answered, t.feedback, t.view)
    # a degenerate memory answer: one click asks the same question in text mode
    t.text_btn.click(lambda: "text", None, t.inputs.mode, queue=False,
                     api_visibility="private").then(
        None, None, None, js=ASK_CLICK_JS, queue=False, api_visibility="private")
    t.inputs.doc.change(bind(s, history_rows), t.inputs.doc, t.history, api_visibility="private")
    t.inputs.doc.change(bind(s, doc_memory_line), t.inputs.doc, t.mem_line, **private)
    feedback.wire_bar(s, t.feedback, t.view, t.history.select)
    restored = t.history.select(
        bind(s, history_select, t), t.inputs.doc,
        [t.answer, t.answer_fold, t.answer_box, t.key_md, t.metrics, t.cited, t.route_plot,
         t.manual_plot, t.route_table, t.summary, t.inputs.question, t.view, t.inputs.mode,
         t.inputs.router, t.quote_md, t.passages],
        api_visibility="private").then(
        bind(s, show_view, t), t.view, t.view_outputs(), **private)
    feedback.wire_box(restored, t.feedback, t.view)
    t.cited.select(bind(s, cited_select, t), t.view, [t.node_head, t.node_text,
                                                      *t.page_outputs()],
                   api_visibility="private", concurrency_limit=2, concurrency_id="pages")
    t.evidence_table.select(bind(s, evidence_select, t), None, t.page_outputs(),
                            api_visibility="private", concurrency_limit=2,
                            concurrency_id="pages")
    t.passages.click(bind(s, passage_select, t), t.view, t.page_outputs(),
                     api_visibility="private", concurrency_limit=2, concurrency_id="pages")
    t.route_table.select(bind(s, route_select, t), None, [t.node_head, t.node_text],
                         api_visibility="private")
    t.agree_table.select(bind(s, agreement_select, t), None, [t.node_head, t.node_text],
                         api_visibility="private")
