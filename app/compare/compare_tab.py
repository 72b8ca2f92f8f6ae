"""The Compare tab: the same question in two modes, side by side: answers, time to first token,
prefill tokens, peak memory and routing trees (the paper's efficiency comparison, H2MT section 5,
on one question)."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from app.shared.ask_request import AskRequest
from app.shared.binding import bind
from app.shared.lines import marked_answer
from app.shared.memory_lines import agreeing_notice
from app.shared.state import AppState, doc_choices, empty_figure
from app.shared.user_errors import MemoriesPending
from app.views.answer_view import figures, metrics_md
from engine.answer.modes import MODES
from engine.answer.notices import DEGENERATE_REASONS


def do_compare(s: AppState, doc, question, mode_a, mode_b, k, max_depth, budget, gate,
               max_new_tokens, *, user: str | None = None):
    out = []
    table = []
    for mode in (mode_a, mode_b):
        try:
            a = s.run_ask(doc, question, AskRequest(doc, question, mode, k, max_depth, budget,
                                                    gate, False, max_new_tokens,
                                                    router=None).options(s.settings),
                          user)
        except MemoriesPending as e:  # this side waits for memories; the other still runs
            notice = agreeing_notice(s, doc, str(e))
            gr.Warning(notice)
            out += [f"({notice})", "", empty_figure(f"{mode} mode waits for the memories")]
            table.append([mode, None, None, None, None, None, 0, 0])
            continue
        shown = marked_answer(a.text, a.traits.generates, a.degenerate,
                              a.fold_line if a.folded else None,
                              DEGENERATE_REASONS.get(a.degenerate, "") if a.degenerate else "")
        out += [shown, metrics_md(a), figures(s, a, doc).tree]
        m = a.metrics
        table.append([mode, round(m.ttft_ms), round(m.total_ms), m.prefill_tokens,
                      m.generated_tokens, round(m.peak_mem_mb, 1),
                      len(a.route.selected) if a.route else 0, len(a.cited)])
    return (*out, table)


@dataclass
class CompareTab:
    """The Compare tab's components."""
    doc: gr.Dropdown
    question: gr.Textbox
    button: gr.Button
    inputs: list  # mode A, mode B, k, depth cap, budget, gate, max new tokens
    outputs: list  # answer, metrics and tree of A, the same of B, the side-by-side table


def build(s: AppState) -> CompareTab:
    """The tab's components, inside the caller's ``gr.Tabs``."""
    with gr.Tab("Compare", id="compare"):
        gr.Markdown("Run the same question in two modes and compare answers, time to "
                    "first token, prefill tokens, peak memory and routing trees.")
        with gr.Row():
            cmp_doc = gr.Dropdown(label="Manual", choices=doc_choices(s, True), scale=2,
                                  elem_id="compare-doc", allow_custom_value=True)
            cmp_q = gr.Textbox(label="Question", scale=5, elem_id="compare-question")
            cmp_btn = gr.Button("Compare", variant="primary", scale=1,
                                elem_id="compare-button")
        with gr.Row():
            mode_a = gr.Dropdown(list(MODES), value="memory", label="Mode A",
                                 elem_id="compare-mode-a")
            mode_b = gr.Dropdown(list(MODES), value="text", label="Mode B",
                                 elem_id="compare-mode-b")
            cmp_k = gr.Slider(1, 8, value=3, step=1, label="k")
            cmp_depth = gr.Number(value=0, precision=0, label="Depth cap (0 = none)")
            cmp_budget = gr.Number(value=0, precision=0, label="Budget (0 = none)")
            cmp_gate = gr.Checkbox(value=True, label="Gate on")
            cmp_new = gr.Number(value=64, precision=0,
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
    return CompareTab(cmp_doc, cmp_q, cmp_btn,
                      [mode_a, mode_b, cmp_k, cmp_depth, cmp_budget, cmp_gate, cmp_new],
                      [ans_a, met_a, plot_a, ans_b, met_b, plot_b, cmp_table])


def wire(s: AppState, t: CompareTab) -> None:
    """The tab's events."""
    t.button.click(bind(s, do_compare), [t.doc, t.question, *t.inputs], t.outputs,
                   concurrency_limit=s.settings.max_asks_in_flight, concurrency_id="answer",
                   api_name="compare",
                   preprocess=False)  # bad values: AskRequest.options' one line
