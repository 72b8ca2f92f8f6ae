"""The Ask tab's history: a manual's newest questions from the query log, and one of them shown
again (its answer, metrics, routing tree and settings) when its row is selected."""
from __future__ import annotations

import gradio as gr

from app.ask.ask_components import AskTab
from app.shared.lines import headline
from app.shared.state import ALL, AppState, doc_arg, empty_figure, picked_id
from app.views.passages_view import passages_html
from app.views.answer_view import (MODE_HELP, ROUTER_LABELS, figure_of, metric_rows, route_from_log,
                                   trees_of)
from app.views.figures import figure_summary
from app.views.icicle import manual_figure
from app.views.route_tables import node_pages, route_rows
from app.views.view_state import ViewState


HISTORY_COLUMNS = ["query", "asked (UTC)", "mode", "question", "answer", "TTFT ms", "selected"]
# The history table lists this many of a manual's newest questions: every answer refreshes it,
# so reading a long log whole there would cost time and memory growing with the log.
HISTORY_ROWS = 50


def history_rows(s: AppState, doc, *, user: str | None = None) -> list[list]:
    """A manual's newest questions that ``user`` may see (their own; an admin's: everyone's)."""
    doc_id = picked_id(doc)  # the picker takes typed values: not an id, no history
    if doc_id is None:
        return []
    rows = []
    for q in reversed(s.rt.library.list_queries(doc_id, newest=HISTORY_ROWS,
                                                asker=s.history_asker(user))):
        m = q.metrics or {}
        sel = sum(1 for r in (q.route or []) if r.get("status") == "selected")
        ans = " ".join((q.answer or "").split())
        rows.append([q.id, q.created_at.strftime("%Y-%m-%d %H:%M:%S"), q.mode, q.question,
                     ans if len(ans) <= 80 else ans[:79] + "…",
                     round(m.get("ttft_ms", 0) or 0), sel])
    return rows


def history_select(s: AppState, t: AskTab, doc, evt: gr.SelectData, *,
                   user: str | None = None) -> dict:
    """A logged question shown again: its answer, metrics, tree and tables, the question, and
    the mode and router it was asked with (when the page still offers them)."""
    row = evt.row_value or []
    if not row or doc in (None, "", ALL):
        raise gr.Error("Select a question of the history.")
    rec = s.rt.library.get_query(int(row[0]))
    mine = s.history_asker(user) in (None, getattr(rec, "asker", None))
    if rec is None or rec.doc_id != doc_arg(doc) or not mine:
        raise gr.Error("That question is no longer in the log.")
    rows = [("from the log", f"query {rec.id}"), ("mode", rec.mode),
            *metric_rows(rec.metrics or {})]
    metrics = "| metric | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)
    logged = rec.settings or {}
    # the passages of the last answer are not this question's: shown only where the record
    # holds its quote (as passage 1), else hidden with the line above the answer
    quote = getattr(rec, "quote", None) or None
    passages = [quote] if quote else []
    # shown unfolded: the log keeps the answer, not what its model read
    out = {t.answer: rec.answer, t.answer_box: gr.update(visible=True),
           t.answer_fold: gr.update(value="", visible=False),
           t.key_md: gr.update(value="", visible=False), t.metrics: metrics,
           t.inputs.question: rec.question,
           t.quote_md: gr.update(value=headline(quote, False), visible=bool(quote)),
           t.passages: gr.update(value=passages_html(passages), visible=bool(passages))}
    if rec.mode in MODE_HELP:
        out[t.inputs.mode] = rec.mode
    if logged.get("router") in ROUTER_LABELS:
        out[t.inputs.router] = logged["router"]
    if not rec.route:
        msg = ("This question's routing is not in the log (answered without routing, or "
               "older than the newest H2MT_QUERY_LOG_ROUTES questions).")
        return {**out, t.cited: [], t.route_plot: empty_figure(msg),
                t.manual_plot: empty_figure(msg), t.route_table: [], t.summary: {},
                t.view: ViewState(notice="", agreement=msg, agreement_rows=[], evidence=[],
                                  evidence_note="", offer_text=False, query_id=rec.id,
                                  passages=passages)}
    route = route_from_log(rec.route, rec.settings)
    trees = trees_of(s, route)
    fig = figure_of(s, route, title=f"Routing tree of query {rec.id} (from the log)",
                    trees=trees)
    cited = [[j + 1, n.title, node_pages(n, trees), n.doc_id, n.node_id]
             for j, n in enumerate(route.nodes[i] for i in route.selected)]
    view = ViewState(notice="", agreement="The other router's selection is not kept in the "
                     "query log: ask again to compare the routers.", agreement_rows=[],
                     evidence=[], evidence_note="Evidence lines are not kept in the query "
                     "log: select a cited section to read its page.", offer_text=False,
                     query_id=rec.id, passages=passages)
    return {**out, t.cited: cited, t.route_plot: fig, t.manual_plot: manual_figure(route),
            t.route_table: route_rows(route, None, trees), t.summary: figure_summary(fig), t.view: view}
