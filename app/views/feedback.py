"""Feedback on answers: the Ask tab's thumbs up / down (and an optional line of text) under the
answer, the same as an API call (``rate_answer``, one of the documented tools:
app/server/mcp_tools.py), and the Library tab's list of a manual's answers marked wrong.

A verdict is stored with the logged question it judges (storage/feedback.py: the route, the
answer, the quote and the check as logged), so ``python -m bench.feedback`` can turn the answers
marked wrong into a question file for the dev probe.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

import gradio as gr

from app.shared.lines import check_word
from app.shared.binding import bind
from app.shared.state import AppState, md_text, picked_id
from app.shared.user_errors import user_error
from app.views.hover import pages_label
from app.views.view_state import ViewState
from storage.feedback import Feedback, QueryNotFound

Rating = Literal["up", "down"]
WRONG_COLUMNS = ["query", "asked (UTC)", "question", "answer", "quote page", "check", "note"]
ASK_LINE = "Was this answer right? Your verdict is kept with the question (Library tab)."
DOWN_NOTE = ("Say what was wrong or missing in the box above (optional), then press 👎 Wrong "
             "again to keep your note with it.")


def rate_answer(s: AppState, query_id: int, rating: Rating, note: str = "") -> str:
    """Tell the explorer whether an answer was right ("up") or wrong ("down"), with an optional
    line saying why. Kept with the logged question; the Library tab lists the answers marked
    wrong, and a later verdict on the same answer replaces this one.

    Args:
        query_id: the answer's query id (ask_manual returns it).
        rating: "up" (right) or "down" (wrong).
        note: optional, one line: what was wrong or missing.

    Returns:
        A JSON object, the stored verdict: query id, question, rating, note.
    """
    return json.dumps(rate(s, query_id, rating, note), ensure_ascii=False)


def rate(s: AppState, query_id, rating: str, note: str) -> dict:
    """Store a verdict (one line for a user's mistake); what was stored."""
    try:
        rated = Feedback(s.rt.library).rate(int(query_id), rating, note)
    except (QueryNotFound, ValueError, TypeError) as e:
        raise user_error(str(e)) from None
    return {"query_id": rated.query.id, "question": rated.query.question,
            "rating": rated.rating, "note": rated.note}


def rate_shown(s: AppState, rating: str, view: ViewState, note: str):
    """The Ask tab's thumbs: the verdict on the answer shown (a new one or one from history)."""
    query_id = (view or ViewState()).query_id
    if query_id is None:
        raise user_error("Ask a question first: there is no logged answer to rate.")
    rated = rate(s, query_id, rating, note)
    mark = "👍 right" if rated["rating"] == "up" else "👎 wrong"
    said = f" ({md_text(rated['note'])})" if rated["note"] else ""
    line = f"Kept: query {rated['query_id']} marked **{mark}**{said}."
    if rated["rating"] == "down" and not rated["note"]:
        line += " " + DOWN_NOTE
    return line


def wrong_rows(s: AppState, doc) -> list[list]:
    """The Library tab's rows: the chosen manual's answers marked wrong, oldest first."""
    doc_id = picked_id(doc)
    if doc_id is None:
        return []
    rows = []
    for r in Feedback(s.rt.library).list(doc_id, rating="down"):
        answer = " ".join((r.query.answer or "").split())
        page = pages_label(r.quote.get("page"), None) if r.quote else "no quote"
        check = check_word({"check": r.check, "folded": (r.check or {}).get("folded")})
        rows.append([r.query.id, r.query.created_at.strftime("%Y-%m-%d %H:%M"),
                     r.query.question, answer if len(answer) <= 120 else answer[:119] + "…",
                     page, check, r.note])
    return rows


# -- the Ask tab's bar ---------------------------------------------------------------------------

@dataclass
class FeedbackBar:
    """Thumbs up / down and a line of text under the answer, in a box shown once an answer
    with a logged question is on the page."""
    box: gr.Column
    up: gr.Button
    down: gr.Button
    note: gr.Textbox
    line: gr.Markdown

    def outputs(self) -> list:
        return [self.box, self.line, self.note]

    def cleared(self) -> dict:
        """Hidden, with a fresh line and an empty note (another answer is coming)."""
        return {self.box: gr.update(visible=False), self.line: ASK_LINE, self.note: ""}



def box_for(view: ViewState):
    """The bar's box for the answer ``view`` describes: shown when it is logged, hidden when
    not; left as it is for a notice that leaves the last answer on the page."""
    view = view or ViewState()
    if view.evidence is None and view.query_id is None:
        return gr.skip()
    return gr.update(visible=view.query_id is not None)


def build_bar() -> FeedbackBar:
    with gr.Column(visible=False, elem_id="feedback-box") as box:
        with gr.Row(equal_height=True, elem_id="feedback-bar"):
            up = gr.Button("👍 Right", size="sm", scale=0, min_width=90, elem_id="feedback-up")
            down = gr.Button("👎 Wrong", size="sm", scale=0, min_width=90,
                             elem_id="feedback-down")
            note = gr.Textbox(show_label=False, lines=1, max_lines=1, scale=4, max_length=500,
                              placeholder="What was wrong or missing? (optional, then a thumb)",
                              elem_id="feedback-note")
        line = gr.Markdown(ASK_LINE, elem_id="feedback-line")
    return FeedbackBar(box, up, down, note, line)


def wire_bar(s: AppState, bar: FeedbackBar, view: gr.State, shown) -> None:
    """``shown``: the trigger of an old answer shown again (a history row), which gives a
    fresh line and an empty note, as an ask does (ask_handlers.clear_before_ask). (Not
    ``view.change``: Gradio hashes a watched State's value, and ViewState holds lists.)"""
    private = dict(api_visibility="private", show_progress="hidden", queue=False)
    for button, rating in ((bar.up, "up"), (bar.down, "down")):
        button.click(bind(s, rate_shown, rating), [view, bar.note], bar.line, **private)
    shown(lambda: (gr.skip(), ASK_LINE, ""), None, bar.outputs(), **private)


def wire_box(event, bar: FeedbackBar, view: gr.State):
    """After ``event`` has set the view State: the bar shown or hidden (``box_for``)."""
    return event.then(box_for, view, bar.box, api_visibility="private", show_progress="hidden",
                      queue=False)


# -- the Library tab's list ----------------------------------------------------------------------

def build_wrong_list() -> gr.Dataframe:
    with gr.Accordion("Answers marked wrong (👎 in the Ask tab)", open=False,
                      elem_id="wrong-answers-fold"):
        return gr.Dataframe(headers=WRONG_COLUMNS, type="array", interactive=False,
                            wrap=True, max_height=360, elem_id="wrong-answers-table",
                            label="This manual's answers marked wrong (python -m bench.feedback "
                                  "exports them as a question file)")


def wire_wrong_list(s: AppState, doc: gr.Dropdown, table: gr.Dataframe) -> None:
    doc.change(bind(s, wrong_rows), doc, table, api_name="wrong_answers", show_progress="hidden")
