"""The Compare tab: the same question in two modes, side by side: answers, time to first token,
prefill tokens, peak memory and routing trees (the paper's efficiency comparison, H2MT section 5,
on one question)."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from app.shared.ask_request import AskRequest, FormRequest, form_default
from app.shared.binding import bind
from app.shared.lines import marked_answer
from app.shared.memory_lines import agreeing_notice
from app.shared.option_controls import control
from app.shared.state import AppState, doc_choices, empty_figure
from app.shared.user_errors import MemoriesPending
from app.views.answer_view import figures, metrics_md
from engine.answer.modes import MODES
from engine.answer.notices import DEGENERATE_REASONS
from engine.answer.option_table import COMPARE

# The Compare tab's own words for its controls (its answers are shorter than the Ask tab's).
COMPARE_CONTROLS = {"max_new_tokens": dict(value=64, elem_id="compare-max-new", info=None)}


class CompareRequest(FormRequest):
    """/compare's parameters: the manual, the question, the two modes, then the Ask options
    offered on the Compare tab (``option_table.offered(COMPARE)``)."""

    FIRST = ("doc", "question", "mode_a", "mode_b")
    WHERE = COMPARE
    __slots__ = ()

    def ask(self, mode: str) -> AskRequest:
        """The Ask tab's request of one side: this one's values, the rest the Ask form's
        defaults (no HDT positions), the settings' router."""
        ask_form = {o.name: form_default(o) for o in AskRequest.options_offered()}
        mine = {o.name: self.values[o.name] for o in self.options_offered()}
        return AskRequest(**{**ask_form, **mine, "doc": self.doc, "question": self.question,
                             "mode": mode, "router": None})


def do_compare(s: AppState, t: CompareTab, req: CompareRequest, *, user: str | None = None):
    """Both sides' answer, metrics and tree, and the side-by-side table, keyed by component."""
    out: dict = {}
    table = []
    for mode, (answer, metrics, plot) in zip((req.mode_a, req.mode_b), t.sides):
        try:
            a = s.ask(req.doc, req.question, req.ask(mode).options(s.settings), user)
        except MemoriesPending as e:  # this side waits for memories; the other still runs
            notice = agreeing_notice(s, req.doc, str(e))
            gr.Warning(notice)
            out.update({answer: f"({notice})", metrics: "",
                        plot: empty_figure(f"{mode} mode waits for the memories")})
            table.append([mode, None, None, None, None, None, 0, 0])
            continue
        shown = marked_answer(a.text, a.traits.generates, a.degenerate,
                              a.fold_line if a.folded else None,
                              DEGENERATE_REASONS.get(a.degenerate, "") if a.degenerate else "")
        out.update({answer: shown, metrics: metrics_md(a), plot: figures(s, a, req.doc).tree})
        m = a.metrics
        table.append([mode, round(m.ttft_ms), round(m.total_ms), m.prefill_tokens,
                      m.generated_tokens, round(m.peak_mem_mb, 1),
                      len(a.route.selected) if a.route else 0, len(a.cited)])
    return {**out, t.table: table}


@dataclass
class CompareTab:
    """The Compare tab's components."""
    doc: gr.Dropdown
    question: gr.Textbox
    button: gr.Button
    inputs: list  # mode A, mode B, then one per option offered (CompareRequest's order)
    sides: list  # (answer, metrics, tree) of A, the same of B
    table: gr.Dataframe  # side by side

    @property
    def outputs(self) -> list:
        """/compare's outputs: answer, metrics and tree of A, the same of B, the table."""
        return [*(c for side in self.sides for c in side), self.table]


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
            options = [control(o, "compare", **COMPARE_CONTROLS.get(o.name, {}))
                       for o in CompareRequest.options_offered()]
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
    return CompareTab(cmp_doc, cmp_q, cmp_btn, [mode_a, mode_b, *options],
                      [(ans_a, met_a, plot_a), (ans_b, met_b, plot_b)], cmp_table)


def wire(s: AppState, t: CompareTab) -> None:
    """The tab's events."""
    t.button.click(bind(s, do_compare, t, request=CompareRequest), [t.doc, t.question, *t.inputs],
                   t.outputs,
                   concurrency_limit=s.settings.max_asks_in_flight, concurrency_id="answer",
                   api_name="compare",
                   preprocess=False)  # bad values: AskRequest.options' one line
