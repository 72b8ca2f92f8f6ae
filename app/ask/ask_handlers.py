"""The Ask tab's handlers: one parsed request in (``app/shared/ask_request.AskRequest``), updates
keyed by component out (Gradio's dict returns: a component left out keeps its value).

Answers stream (``do_ask`` is a generator over engine.ask.ask_stream, and so is the /ask API: a
gradio_client ``submit`` sees every step): the routing tree, its tables and the sections to be read
appear as soon as routing ends, then the answer token by token, then the final answer with its
metrics, history and evidence lines. The /ask outputs keep their shape; the evidence lines,
``degenerate`` and ``cut`` travel in the summary JSON, and to the page in the ``view`` State
(``app/views/view_state.py``, shown by ``show_view``). An output the engine labels degenerate is not
shown as an answer: a notice gives the engine's warning and the output, and a button asks the same
question in text mode. Memory mode (and the memory router) on a document still being written says so
in a notice and leaves the other outputs as they were.
"""
from __future__ import annotations

import re
from dataclasses import replace
from itertools import chain

import gradio as gr

from app.ask.answer_fold import answer_markdown
from app.ask.ask_components import AskTab
from app.ask.ask_history import history_rows
from app.shared.ask_request import AskRequest
from app.shared.lines import MANUAL_COL, PAGE_HINT, SECTION_COL
from app.shared.memory_lines import agreeing_notice
from app.shared.state import AppState, md_text, node_view
from app.shared.user_errors import MemoriesPending
from app.views.answer_view import (cited_rows, evidence_rows, evidence_summary, figures,
                                   generating_md, metrics_md, page_outputs, passage_lines,
                                   quote_outputs, route_views)
from app.views.pages import Line
from app.views.passages_view import passages_html
from app.views.quote_view import quote_markdown
from app.views.route_tables import AGREEMENT_COLUMNS, ROUTE_COLUMNS
from app.views.view_state import ViewState
from engine.answer.events import AnswerReady, RouteReady, TokenChunk
from engine.document.tree import page_name
from engine.answer.notices import DEGENERATE_REASONS


CITED_COLUMNS = ["#", "title", "pages", MANUAL_COL, SECTION_COL]
EVIDENCE_COLUMNS = ["#", "score", "page", "heading", "sentence", MANUAL_COL, SECTION_COL]



# -- asking --------------------------------------------------------------------------------------

def do_ask(s: AppState, t: AskTab, req: AskRequest, *, user: str | None = None):
    """Streams: the routing tree, icicle, route table and the sections to be read as soon
    as routing ends, then the answer as it is generated, then the final answer, metrics,
    history and (in the view State) the evidence lines and notices."""
    opts = req.options(s.settings)
    events = s.ask_stream(req.doc, req.question, opts, user)
    try:
        first = next(events)  # the request's errors come before the first event
    except MemoriesPending as e:  # a notice; the last answer and tree stay as they were
        notice = agreeing_notice(s, req.doc, str(e))
        gr.Warning(notice)
        yield {t.view: ViewState(notice=notice)}
        return
    text, quoted, mode, answered = "", False, None, None
    for ev in chain([first], events):
        if isinstance(ev, RouteReady):
            mode = ev.mode
            rv = route_views(s, ev.route, None, req.doc, ev.mode.name,
                             [c.id for c in ev.cited], None)
            rv.summary["generating"] = ev.mode.generates
            rv.summary["quote"] = ev.quote.as_json() if ev.quote is not None else None
            quoted = ev.quote is not None or ev.not_covered
            yield {t.answer: "", t.answer_box: gr.update(visible=True),
                   t.answer_fold: gr.update(value="", visible=False),
                   t.key_md: gr.update(value="", visible=False),
                   t.metrics: generating_md(ev.mode, ev.route, ""),
                   t.cited: cited_rows(ev.cited), **route_updates(t, rv), t.view: rv.view,
                   **quote_updates(t, *quote_outputs(s, ev.quote, ev.not_covered, ev.mode)),
                   **passages_updates(t, [ev.quote.as_json()] if ev.quote is not None else [])}
        elif isinstance(ev, TokenChunk):
            text += ev.text
            yield {t.answer: text, t.metrics: generating_md(mode, None, text)}
        elif isinstance(ev, AnswerReady):
            a, ready = ev.answer, ev  # a quote found after generation (memory, full, flat)
            late = ({} if quoted
                    else quote_updates(t, *quote_outputs(s, a.quote, a.not_covered, a.traits)))
            answered = {**final_updates(s, t, a, req.doc, user), **late}
            yield answered
    if answered is not None and ready.query_id is not None:  # logged after it was shown: the
        # same outputs (a client's last result keeps its shape), its feedback and history
        yield {**answered, t.view: replace(answered[t.view], query_id=ready.query_id),
               t.history: history_rows(s, req.doc, user=user)}


def passages_updates(t: AskTab, passages: list[dict], open_count: int = 1) -> dict:
    """The passages block (app/views/passages_view.py): ``passages`` (their JSON, the quote
    first), the first ``open_count`` shown whole; hidden when there is none."""
    return {t.passages: gr.update(value=passages_html(passages, open_count),
                                  visible=bool(passages))}


def route_updates(t: AskTab, rv) -> dict:
    """The routing tree, icicle, scored nodes and figure data of
    ``app/views/answer_view.RouteViews``."""
    return {t.route_plot: rv.tree, t.manual_plot: rv.icicle, t.route_table: rv.rows,
            t.summary: rv.summary}


def page_updates(t: AskTab, page) -> dict:
    """The page view of ``app/views/answer_view.PageUpdate`` (None: left as it is)."""
    if page is None:
        return {}
    return {t.page_head: page.head, t.page_image: page.image, t.page_text: page.text}


def quote_updates(t: AskTab, quote_md, page) -> dict:
    return {t.quote_md: quote_md, **page_updates(t, page)}


def final_updates(s: AppState, t: AskTab, a, doc, user: str | None = None) -> dict:
    """The outputs of a finished answer (and its view State: notice, evidence lines)."""
    rv = figures(s, a, doc)
    out = a.as_json()  # the one serialisation of an answer
    degenerate, evidence, reader_error = a.degenerate, out["evidence"], a.reader_error
    if reader_error:  # the served reader failed: its one line; the quote and route stay
        shown = "(no answer: the reader failed; see the note)"
        notice, offer_text = f"No answer: {reader_error}", False
    elif degenerate:  # not presented as an answer: a notice, and the text mode offered
        why = DEGENERATE_REASONS.get(degenerate, str(degenerate))
        shown = f"(no answer: the {a.mode}-mode output is not usable, {why}; see the note)"
        raw = " ".join((a.text or "").split())
        notice = ((agreeing_notice(s, doc, a.warning or "")
                   or "This output is not a usable answer.")
                  + (f" The model wrote: “{raw[:200]}{'…' if len(raw) > 200 else ''}”"
                     if raw else ""))
        offer_text = a.traits.offers_text_mode
    else:
        shown = a.text if a.text else ("(the model generated nothing)" if a.traits.generates
                                        else "(routing only: no answer generated)")
        notice, offer_text = agreeing_notice(s, doc, a.warning or ""), False
    view = replace(rv.view, notice=notice, offer_text=offer_text, evidence=evidence,
                   evidence_note=evidence_summary(a, evidence, degenerate),
                   query_id=getattr(a, "query_id", None), passages=out["passages"])
    rv.summary.update(degenerate=degenerate, evidence=evidence, answer=a.text,
                      **{k: out[k] for k in ("cut", "cut_at", "quote", "not_covered", "reader",
                                             "reader_error")})
    places = out["places"]
    headline = quote_markdown(a.quote, a.not_covered, a.traits.generates, places["verdict"])
    return {**answer_updates(t, a, out, shown), t.metrics: metrics_md(a), t.cited: cited_rows(a),
            **route_updates(t, rv), t.history: history_rows(s, doc, user=user), t.view: view,
            t.quote_md: gr.update(value=headline, visible=bool(headline)),
            **passages_updates(t, out["passages"], places["open"])}


def answer_updates(t: AskTab, a, out: dict, shown: str) -> dict:
    """The short answer (the manual's term for a name question, engine.answer.passages.short_answer)
    and the key line (the manual's line that answers, with its page, engine.answer.checks.key_line)
    above the answer box, or, for an answer the check flags or doubts
    (engine.answer.checks.check, engine.answer.checks.verdict), the answer folded under one line
    saying why, its unsupported terms marked (app/ask/answer_fold.py): the quote and the key line
    above it stay the first things read. A degenerate output is already kept out of the answer
    box (``shown`` says so and the notice holds it). ``out``: the answer's JSON."""
    key, short = out.get("key_line"), out.get("short_answer")
    lines = ([short_answer_md(short)] if short is not None else []) + \
        ([key_line_md(key)] if key is not None and out.get("key_line_shown") and not (
            short is not None and key["text"] == short["text"]) else [])
    keyed = {t.key_md: gr.update(value="\n\n".join(lines), visible=True) if lines
             else gr.update(value="", visible=False)}
    if not a.folded or a.degenerate:
        return {t.answer: shown, t.answer_box: gr.update(visible=True),
                t.answer_fold: gr.update(value="", visible=False), **keyed}
    body = answer_markdown(a.text, out["unsupported"], a.fold_line)
    return {t.answer: shown, t.answer_box: gr.update(visible=False),
            t.answer_fold: gr.update(value=body, visible=True), **keyed}


def short_answer_md(short: dict) -> str:
    """The short answer as shown (its JSON): the manual's term, then its line and page."""
    where = page_name(short["page"], short.get("page_label")) if short["page"] else "page unknown"
    term, line = (x.replace("`", "\u02cb") for x in (short["term"], short["text"]))
    return f"**Short answer: `{term}`** <small>(the manual's own term, {where}: `{line}`)</small>"


def key_line_md(key: dict) -> str:
    """The key line as shown (its JSON): the manual's line in code, its page and section."""
    where = f"p. {key['page']}"  # shown only with its page (engine.answer.shown)
    body = key["text"].replace("`", "\u02cb")
    return f"**From the manual ({where}, {md_text(key['heading'] or 'section')}):** `{body}`"


def validate_ask(s: AppState, t: AskTab, req: AskRequest) -> list:
    """Gradio validator of /ask (the page and API clients): a bad question or option value is
    one line under its input (``AskRequest.problems``: the engine's rules, in every
    mode), and nothing is asked, stored or wiped. One ``gr.validate`` per input, in
    ``AskRequest``'s order."""
    problems = req.problems(s.settings)
    return [gr.validate(name not in problems, problems.get(name, ""))
            for name in AskRequest.names()]


def clear_before_ask(s: AppState, t: AskTab, req: AskRequest) -> dict:
    """The last answer's notes and page view, cleared when a request is asked (no stale
    comparison while asking); a request the validator refuses keeps them."""
    problems = req.problems(s.settings)
    if problems:  # nothing asked; no manual or no question: one line that stays until the
        # next ask (the validator's own line under the input is hidden for these two, app/ui.py)
        kept = left_as_shown([*t.view_outputs(), *t.page_outputs(), *t.feedback.outputs()])
        first = next((problems[n] for n in ("doc", "question") if n in problems), None)
        return kept if first is None else {**kept, t.notice: f"**{first}**"}
    hidden = gr.update(value=None, visible=False)
    return {t.notice: "", t.agree_md: "", t.agree_table: [], t.evidence_table: [],
            t.evidence_note: "", t.text_btn: gr.update(visible=False), t.page_head: PAGE_HINT,
            t.page_image: hidden, t.page_text: gr.update(value="", visible=False),
            **t.feedback.cleared()}


def show_view(s: AppState, t: AskTab, view: ViewState) -> dict:
    """The notice line, the disagreement view, the evidence lines and the text-mode offer of
    the last answer (``ViewState``: a field left None is left as shown)."""
    view = view or ViewState()
    shown = {t.notice: None if view.notice is None
             else (f"**Note:** {md_text(view.notice)}" if view.notice else ""),
             t.agree_md: view.agreement, t.agree_table: view.agreement_rows,
             t.evidence_table: None if view.evidence is None
             else evidence_rows(s, view.evidence),
             t.evidence_note: view.evidence_note,
             t.text_btn: None if view.offer_text is None
             else gr.update(visible=view.offer_text)}
    return {**left_as_shown(t.view_outputs()),
            **{c: v for c, v in shown.items() if v is not None}}


def left_as_shown(components: list) -> dict:
    """Each of ``components`` kept as the page shows it. Gradio reads an empty dict as one
    output value, not as "no update", so a handler that may change nothing names them."""
    return {c: gr.skip() for c in components}


# -- selecting a row ------------------------------------------------------------------------------

def row_node(s: AppState, t: AskTab, evt: gr.SelectData, doc_col: int, node_col: int) -> dict:
    """The section text of a selected row's node."""
    row = evt.row_value or []
    if len(row) <= max(doc_col, node_col) or row[doc_col] in (None, ""):
        return {t.node_head: "The root of a library-wide route is not a stored node.",
                t.node_text: ""}
    head, text = node_view(s, row[doc_col], row[node_col])
    return {t.node_head: head, t.node_text: text}


def cited_select(s: AppState, t: AskTab, view: ViewState, evt: gr.SelectData) -> dict:
    doc_col, node_col = CITED_COLUMNS.index(MANUAL_COL), CITED_COLUMNS.index(SECTION_COL)
    out = row_node(s, t, evt, doc_col, node_col)
    row = evt.row_value or []
    if len(row) <= node_col or row[doc_col] in (None, ""):
        return out
    lines = (view or ViewState()).node_lines(row[doc_col], row[node_col])
    return {**out, **page_updates(t, page_outputs(s, row[doc_col], row[node_col], lines))}


def physical_page(shown) -> int | None:
    """The physical page of an evidence row's page cell ("p. 8 (PDF page 10)" -> 10, "p. 3" -> 3)."""
    m = re.search(r"PDF page (\d+)", str(shown)) or re.search(r"(\d+)\s*$", str(shown))
    return int(m.group(1)) if m else None


def evidence_select(s: AppState, t: AskTab, evt: gr.SelectData) -> dict:
    row = evt.row_value or []
    doc_col, node_col = EVIDENCE_COLUMNS.index(MANUAL_COL), EVIDENCE_COLUMNS.index(SECTION_COL)
    if len(row) <= node_col or row[doc_col] in (None, ""):
        return {t.page_head: "Select an evidence line."}
    line = Line(str(row[EVIDENCE_COLUMNS.index("sentence")]),
                physical_page(row[EVIDENCE_COLUMNS.index("page")]))
    return page_updates(t, page_outputs(s, row[doc_col], row[node_col], [line]))


def passage_select(s: AppState, t: AskTab, view: ViewState, evt: gr.EventData) -> dict:
    """The clicked passage (its rank, 1: the quote) on its page, highlighted."""
    passages = (view.passages if view is not None else None) or []
    rank = (getattr(evt, "_data", None) or {}).get("rank")
    if not isinstance(rank, int) or not 1 <= rank <= len(passages) \
            or passages[rank - 1]["doc"] is None:
        return {t.page_head: "That passage is not in the library any more."}
    p = passages[rank - 1]
    return page_updates(t, page_outputs(s, p["doc"], p["node"],
                                        passage_lines(p["text"], p["page"], p["score"]),
                                        what="passage"))


def route_select(s: AppState, t: AskTab, evt: gr.SelectData) -> dict:
    return row_node(s, t, evt, ROUTE_COLUMNS.index(MANUAL_COL), ROUTE_COLUMNS.index(SECTION_COL))


def agreement_select(s: AppState, t: AskTab, evt: gr.SelectData) -> dict:
    return row_node(s, t, evt, AGREEMENT_COLUMNS.index(MANUAL_COL),
                    AGREEMENT_COLUMNS.index(SECTION_COL))
