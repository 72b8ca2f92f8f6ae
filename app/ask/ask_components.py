"""The Ask tab's components as plain data: its inputs (one per ``AskRequest`` field) and the whole
tab (``AskTab``), built by app/ask/ask_tab.py and read by its handlers (app/ask/ask_handlers.py,
app/ask/ask_history.py), which import this module, not the layout."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from app.shared.ask_request import AskRequest
from app.views import feedback


class AskInputs:
    """The components of the ask inputs, one per ``AskRequest`` input and named as it is
    (``inputs.max_depth``)."""

    def __init__(self, components: dict):
        missing = set(AskRequest.names()) - set(components)
        if missing:
            raise ValueError(f"no control for {sorted(missing)}")
        self.components = components

    def __getattr__(self, name: str):
        try:
            return self.__dict__["components"][name]
        except KeyError:
            raise AttributeError(name) from None

    def in_order(self) -> list:
        """The components in ``AskRequest``'s order (/ask's positional parameters)."""
        return [self.components[name] for name in AskRequest.names()]


@dataclass
class AskTab:
    """The Ask tab's components (``view``: the last answer's notes, app/views/view_state.py, shown
    by ``show_view``)."""
    inputs: AskInputs
    ask_btn: gr.Button
    mem_line: gr.Markdown
    reader_line: gr.Markdown  # which model reads, reachable when last checked (app/ask/reader_view)
    notice: gr.Markdown
    text_btn: gr.Button
    view: gr.State
    quote_md: gr.Markdown
    passages: gr.HTML  # the quote and up to two more passages, readable (passages_view)
    key_md: gr.Markdown  # the manual's key line and its page (engine.answer.checks.key_line)
    answer_fold: gr.Markdown  # a flagged answer, folded under its line (app/ask/answer_fold.py)
    answer_box: gr.Column  # holds the answer; hidden while the answer is folded
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
    feedback: feedback.FeedbackBar  # thumbs up / down under the answer (app/views/feedback.py)

    def answer_outputs(self) -> list:
        """/ask's outputs; the first eight are what API clients receive (README "API"), the
        page view and the view State follow."""
        return [self.answer, self.metrics, self.cited, self.route_plot, self.manual_plot,
                self.route_table, self.summary, self.history, self.quote_md, self.page_head,
                self.page_image, self.page_text, self.answer_fold, self.answer_box, self.key_md,
                self.passages, self.view]

    def view_outputs(self) -> list:
        """What ``show_view`` and ``clear_before_ask`` update."""
        return [self.notice, self.agree_md, self.agree_table, self.evidence_table,
                self.evidence_note, self.text_btn]

    def page_outputs(self) -> list:
        return [self.page_head, self.page_image, self.page_text]
