"""The Ask tab's handlers on the real tab and a tiny real runtime: one parsed request in,
updates keyed by component out (a component left out keeps its value)."""
from __future__ import annotations

import gradio as gr
import pytest

from app.shared.ask_request import AskRequest
from app.views.view_state import ViewState

GUIDE = ("# Pump guide\n\n## Priming the pump\n\nOpen the vent plug, fill the casing with water "
         "until it overflows, then refit the plug.\n\n## Changing the impeller\n\nUnplug the "
         "pump, remove the six cover screws and pull the impeller off its shaft.\n")


@pytest.fixture(scope="module")
def tab(tiny_backbone, tiny_parts, tmp_path_factory):
    """(state, the Ask tab's components, the id of a stored manual)."""
    from app.ask import ask_tab
    from app.shared.memory_writer import memory_writer
    from app.shared.state import AppState
    from engine.ingest import ingest_file
    from engine.runtime import Runtime
    from engine.settings import Settings
    from storage import Library

    folder = tmp_path_factory.mktemp("ask-tab")
    settings = Settings(data_dir=folder)
    rt = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    md = folder / "pump-guide.md"
    md.write_text(GUIDE)
    doc_id = ingest_file(md, rt, memories=False).doc_id
    s = AppState(rt, settings, memory_writer(rt))
    with gr.Blocks(), gr.Tabs():
        t = ask_tab.build(s)
    try:
        yield s, t, doc_id
    finally:
        rt.library.close()


def request(doc_id, **changes) -> AskRequest:
    values = dict(doc=str(doc_id), question="How do I prime the pump?", mode="route", k=2,
                  max_depth=0, budget=0, gate=True, hier_pos=False, max_new_tokens=8,
                  router="lexical")
    return AskRequest(**{**values, **changes})


def changed(updates: dict) -> dict:
    """The updates that change something (gr.skip(): left as shown)."""
    return {c: v for c, v in updates.items() if v != gr.skip()}


def test_the_inputs_are_the_requests_fields_in_order(tab):
    _, t, _ = tab
    assert t.inputs.in_order() == [t.inputs.doc, t.inputs.question, t.inputs.mode, t.inputs.k,
                                   t.inputs.max_depth, t.inputs.budget, t.inputs.gate,
                                   t.inputs.hier_pos, t.inputs.max_new_tokens, t.inputs.router]


def test_validator_marks_the_one_bad_input(tab):
    from app.ask.ask_handlers import validate_ask

    s, t, doc_id = tab
    marks = validate_ask(s, t, request(doc_id, k=0))
    bad = [name for name, m in zip(AskRequest.names(), marks) if not m["is_valid"]]
    assert bad == ["k"] and "k" in marks[AskRequest.names().index("k")]["message"]
    marks = validate_ask(s, t, request(doc_id, question=""))
    assert [m["is_valid"] for m in marks].count(False) == 1 and not marks[1]["is_valid"]
    assert all(m["is_valid"] for m in validate_ask(s, t, request(doc_id)))


def test_a_refused_request_clears_nothing(tab):
    from app.ask.ask_handlers import clear_before_ask

    s, t, doc_id = tab
    kept = clear_before_ask(s, t, request(doc_id, max_new_tokens=0))
    shown = {*t.view_outputs(), *t.page_outputs(), *t.feedback.outputs()}
    assert set(kept) == shown and changed(kept) == {}
    cleared = clear_before_ask(s, t, request(doc_id))
    assert set(cleared) == shown
    assert cleared[t.notice] == "" and cleared[t.text_btn]["visible"] is False
    assert cleared[t.feedback.note] == ""  # the thumbs' note of the last answer


def test_show_view_updates_only_what_the_view_holds(tab):
    from app.ask.ask_handlers import show_view

    s, t, _ = tab
    assert set(show_view(s, t, ViewState())) == set(t.view_outputs())
    assert changed(show_view(s, t, ViewState())) == {}
    assert changed(show_view(s, t, ViewState(notice="wait *now*"))) == {
        t.notice: r"**Note:** wait \*now\*"}
    shown = show_view(s, t, ViewState(notice="", offer_text=True, agreement="both: 1",
                                      agreement_rows=[], evidence=[], evidence_note="none"))
    assert shown[t.notice] == "" and shown[t.text_btn]["visible"] is True
    assert shown[t.evidence_table] == [] and shown[t.agree_md] == "both: 1"


def test_do_ask_streams_updates_keyed_by_the_answer_outputs(tab):
    from app.ask.ask_handlers import do_ask

    s, t, doc_id = tab
    steps = list(do_ask(s, t, request(doc_id)))
    outputs = set(t.answer_outputs())
    assert steps and all(set(step) <= outputs for step in steps)
    routed, final = steps[0], steps[-1]
    # the answer box shown and emptied, the last answer's fold hidden (app/ask/answer_fold.py)
    assert routed[t.answer] == "" and routed[t.answer_box]["visible"] is True
    assert routed[t.answer_fold]["visible"] is False and routed[t.summary]["mode"] == "route"
    assert final[t.answer] == "(routing only: no answer generated)"
    assert final[t.answer_box]["visible"] and not final[t.answer_fold]["visible"]
    assert final[t.history][0][3] == "How do I prime the pump?"
    view = final[t.view]
    assert isinstance(view, ViewState) and view.notice == "" and view.offer_text is False
    assert view.evidence_note == "The route mode has no evidence lines."
    assert final[t.summary]["router"] == "lexical"


def test_history_select_shows_a_logged_question_again(tab):
    from app.ask.ask_handlers import do_ask
    from app.ask.ask_history import history_rows, history_select

    s, t, doc_id = tab
    list(do_ask(s, t, request(doc_id)))
    row = history_rows(s, str(doc_id))[0]
    evt = gr.SelectData(None, {"index": [0, 0], "value": row[0], "row_value": row})
    shown = history_select(s, t, str(doc_id), evt)
    assert shown[t.inputs.question] == "How do I prime the pump?"
    assert shown[t.inputs.mode] == "route" and shown[t.inputs.router] == "lexical"
    assert shown[t.view].evidence == [] and shown[t.cited]
    assert history_rows(s, "all") == [] and history_rows(s, "not an id") == []


def test_a_flagged_answer_is_folded_and_a_clean_one_shown(tab):
    """``answer_updates``: the check's flag hides the answer box and shows the answer folded
    under the check's line, its unsupported term marked; a clean answer is the answer box."""
    from app.ask.ask_handlers import answer_updates
    from engine.answer.checks.check import check_answer
    from engine.answer.question import Question
    from engine.answer.response import Answer, Metrics
    from engine.answer.checks.review import Review

    _, t, _ = tab
    text = "Prime it with --frob."
    check = check_answer(text, ["Open the vent plug and fill the casing."], Question.read("How?"))
    a = Answer(text=text, mode="text", cited=[], metrics=Metrics(), review=Review(check=check))
    out = answer_updates(t, a, a.as_json(), text)
    assert out[t.answer_box]["visible"] is False and out[t.answer_fold]["visible"] is True
    assert out[t.answer] == text  # API clients still receive the answer's text
    assert "<summary>The model&#x27;s answer names --frob" in out[t.answer_fold]["value"]
    assert "Prime it with <mark>--frob</mark>." in out[t.answer_fold]["value"]
    clean = Answer(text="Fill the casing.", mode="text", cited=[], metrics=Metrics(),
                   review=Review(check=check_answer("Fill the casing.", ["fill the casing"],
                                                    Question.read("How?"))))
    out = answer_updates(t, clean, clean.as_json(), clean.text)
    assert out[t.answer] == "Fill the casing." and out[t.answer_box]["visible"] is True
    assert out[t.answer_fold]["visible"] is False


def test_the_passages_are_readable_after_the_answer_and_a_click_opens_one(tab):
    """Issue 67: the quote and the passages after it as readable text in rank order, the line
    above the answer saying where the manual answers; a click on one shows it on its page."""
    from app.ask.ask_handlers import do_ask, passage_select

    s, t, doc_id = tab
    steps = list(do_ask(s, t, request(doc_id, mode="quote")))
    routed, final = steps[0], steps[-1]
    assert 'data-rank="1"' in routed[t.passages]["value"]  # the quote, as soon as it is found
    html, view = final[t.passages]["value"], final[t.view]
    assert final[t.passages]["visible"] and view.passages
    assert html.count('class="passage') == len(view.passages)
    assert "vent plug" in html  # the quote's own words, without a click
    assert "Where the manual answers" in final[t.quote_md]["value"]
    assert "Ranked" not in final[t.quote_md]["value"]
    opened = passage_select(s, t, view, gr.EventData(None, {"rank": 1}))
    assert "the passage marked" in opened[t.page_head] and "evidence" not in opened[t.page_head]
    assert "not in the library" in passage_select(s, t, view, gr.EventData(None, {"rank": 9}))[
        t.page_head]
