"""An answer (engine/answer/response.Answer) or a route as the page's component values: metrics in
plain words, cited rows, the routing tree and icicle (app/views/figures.py), the disagreement view
of the two routers, the evidence lines and the page view of a section (app/views/pages.py). Shared
by the Ask and Compare tabs; no events here.
"""
from __future__ import annotations

import io
import logging
from dataclasses import asdict, dataclass

import gradio as gr
import plotly.graph_objects as go

from app.shared.lines import evidence_line
from app.views.figures import figure_summary, route_figure
from engine.document.tree import page_name, pages_name
from app.shared.memory_lines import pending_unavailable
from app.shared.state import AppState, empty_figure, md_text, section_title
from app.views.folds import route_folds
from app.views.icicle import manual_figure
from app.views.pages import Line, page_view
from app.views.quote_view import quote_markdown
from app.views.route_tables import (agreement_rows, agreement_summary, route_rows, router_agreement,
                                    single_channel, single_channel_reason)
from app.views.view_state import ViewState
from engine.answer.modes import MODES, ModeTraits
from engine.answer.shown import plain_heading
from engine.ask import AskOptions
from engine.routing.channels import LABELS
from engine.routing.fused import ROUTER_WORDS, ROUTERS
from engine.routing.router import Route, WalkLimits
from storage.errors import DocumentNotFound

log = logging.getLogger(__name__)

# Each mode's help line (engine.answer.modes), the default mode first.
MODE_HELP = {name: mode.help for name, mode in
             sorted(MODES.items(), key=lambda item: item[0] != AskOptions.mode)}
# The mode radio's choices: (the mode's label, its name), in MODE_HELP's order.
MODE_CHOICES = [(MODES[name].label, name) for name in MODE_HELP]
# An answer's metrics as the page shows them (key of engine.answer.response.Metrics, label, unit).
METRIC_LABELS = [("ttft_ms", "time to first token (TTFT)", "ms"), ("total_ms", "total", "ms"),
                 ("route_ms", "routing", "ms"), ("quote_ms", "finding the quote", "ms"),
                 ("evidence_ms", "evidence lines", "ms"),
                 ("cpu_wait_ms", "waiting for a free core", "ms"),
                 ("queue_ms", "waiting for the reader", "ms"),
                 ("prefill_ms", "reading the prompt (prefill)", "ms"),
                 ("decode_ms", "writing the answer", "ms"),
                 ("check_ms", "checking the answer", "ms"),
                 ("prefill_tokens", "prefill tokens (the prompt)", ""),
                 ("generated_tokens", "generated tokens", ""),
                 ("peak_mem_mb", "memory added at peak", "")]
# (short: the four fit one row of the Ask tab at 1440 pixels)
ROUTER_LABELS = {"fused": "fused", "memory": LABELS["memory"],
                 "lexical": LABELS["lexical"], "dense": LABELS["dense"]}
# The router radio's choices: (the router's phrase, engine.routing.fused.ROUTER_WORDS, its name).
ROUTER_CHOICES = [(ROUTER_WORDS[r][0], r) for r in ROUTERS]


def route_from_log(records: list[dict], settings: dict | None) -> Route:
    """A Route rebuilt from the query log (what ask() logged), for history views."""
    s = settings or {}
    limits = WalkLimits(int(s.get("k", 0) or 0), s.get("max_depth"), s.get("budget"),
                        float(s.get("temperature", 1.0)))
    return Route.from_records(records, limits,
                              s.get("router") or "memory")  # older logs: memory-routed


def metrics_md(a) -> str:
    rows = [("mode", a.mode), *metric_rows(asdict(a.metrics))]
    if getattr(a, "cut", False):
        rows.append(("cut", f"at {a.cut_at} tokens (the max new tokens limit)"))
    if a.route is not None:
        rows.insert(1, ("selected nodes", f"{len(a.route.selected)} (stop: {a.route.stop_reason})"))
        rows.insert(1, ("router", ROUTER_LABELS.get(a.route.router, a.route.router)))
    return "| metric | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


def metric_rows(m: dict) -> list[tuple[str, object]]:
    """(label, value) rows of an answer's metrics in plain words (a live answer's or a logged
    one's: the same labels)."""
    rows = []
    for key, label, unit in METRIC_LABELS:
        v = m.get(key)
        if v is None or (key in ("evidence_ms", "cpu_wait_ms") and not v):
            continue
        if key == "peak_mem_mb":  # growth over the process's size at the request's start
            rows.append((label, "under 1 MB" if v < 1 else f"{v:.0f} MB"))
        else:
            rows.append((label, f"{v:.0f} {unit}" if unit else v))
    return rows


def cited_rows(cited) -> list[list]:
    """Rows of the cited table from an Answer or a list of Citations."""
    cited = getattr(cited, "cited", cited)
    return [[i + 1, (c.title or "(untitled)") + (" (OCR)" if getattr(c, "ocr", False) else ""),
             pages_name(c.page_start, c.page_end, getattr(c, "page_label", None)), c.doc_id,
             c.node_id] for i, c in enumerate(cited)]


@dataclass
class RouteViews:
    """What the page shows of a route: the routing tree, the icicle, the scored nodes' rows,
    the figure data (JSON) and the disagreement view (in the ``view`` State)."""
    tree: go.Figure
    icicle: go.Figure
    rows: list[list]
    summary: dict
    view: ViewState


def figures(s: AppState, a, doc=None) -> RouteViews:
    """The views of answer ``a``'s route."""
    return route_views(s, a.route, a, doc, a.mode, [c.id for c in a.cited], a.warning)


def route_views(s: AppState, route, a, doc, mode: str, cited: list[int],
                warning: str | None) -> RouteViews:
    """The views of a route: of a finished answer ``a``, or (``a`` None) of a route whose
    answer is still being generated (no gate loops yet)."""
    if route is None:
        msg = f"The {mode} mode does not route: no tree to show."
        return RouteViews(empty_figure(msg), empty_figure(msg), [],
                          {"mode": mode, "route": None, "warning": warning},
                          ViewState(agreement=f"The {mode} mode does not route: nothing to "
                                              "compare.", agreement_rows=[]))
    trees = trees_of(s, route)
    fig = figure_of(s, route, a, trees=trees)
    agreement = router_agreement(route)
    summary = figure_summary(fig)
    summary.update(mode=mode, router=route.router, selected=list(route.selected),
                   cited=list(cited), warning=warning,
                   alternatives={k: list(v) for k, v in route.alternatives.items()},
                   agreement=agreement.counts() if agreement else None)
    why = ("" if agreement else single_channel_reason(route) if single_channel(route)
           else pending_unavailable(s, doc))
    view = ViewState(agreement=agreement_summary(agreement, why),
                     agreement_rows=agreement_rows(route, agreement, trees))
    return RouteViews(fig, manual_figure(route), route_rows(route, a, trees), summary, view)


def trees_of(s: AppState, route) -> dict:
    """The routed manuals' Trees by document id (a manual deleted since is left out)."""
    trees = {}
    for doc_id in {n.doc_id for n in route.nodes if n.doc_id is not None}:
        try:
            trees[doc_id] = s.tree_of(int(doc_id))
        except DocumentNotFound:
            continue
    return trees


def figure_of(s: AppState, route, answer=None, title: str | None = None,
              trees: dict | None = None):
    """The routing tree of ``route`` as drawn in the app: runs of contents / index nodes folded
    (app/views/folds.py) and printed page labels in the hovers, from the routed manuals' Trees
    (``trees``, loaded when not given; a manual deleted since is drawn unfolded, with physical
    page numbers)."""
    trees = trees_of(s, route) if trees is None else trees
    return route_figure(route, answer, title, folds=route_folds(route, trees), trees=trees)


def generating_md(mode: ModeTraits, route, text: str) -> str:
    """The metrics box while an answer of a ``mode`` is being written."""
    if mode.quote_is_answer:
        return "Routing done; the quote is the answer (no text generated)."
    if not mode.generates:
        return "Routing done."
    lines = [f"**Generating the answer** ({mode.name} mode) …"]
    if route is not None:
        lines.append(f"routed: {len(route.selected)} nodes selected "
                     f"(stop: {route.stop_reason})")
    if text:
        lines.append(f"{len(text.split())} words so far")
    return "  \n".join(lines)


def evidence_summary(a, evidence: list[dict], degenerate) -> str:
    """What the evidence table holds, or why it is empty (app/shared/lines.py)."""
    return evidence_line(a.mode, a.traits.has_evidence, bool(degenerate), len(evidence))


def evidence_rows(s: AppState, evidence: list[dict]) -> list[list]:
    return [[i + 1, round(float(e["score"]), 3),
             page_name(e["page"], e.get("page_label")) if e["page"] else "",
             section_title(s, e["doc_id"], e["node_id"], e["title"]), e["text"], e["doc_id"],
             e["node_id"]]
            for i, e in enumerate(evidence)]


@dataclass(frozen=True)
class PageUpdate:
    """The page view's three parts as component updates: the caption (Markdown), the rendered
    page(s) of a PDF source, the section's text with the lines marked of any other source."""
    head: str
    image: dict
    text: dict


def page_outputs(s: AppState, doc_id, node_id, lines: list[Line],
                 what: str = "evidence") -> PageUpdate:
    """The page view of a stored node with ``lines`` highlighted (``what``: "passage" or
    "evidence", as its caption calls them)."""
    hidden = gr.update(value=None, visible=False)
    try:
        doc_id, node_id = int(doc_id), int(node_id)
        node = s.tree_of(doc_id).node(node_id)
        source = s.source_of(doc_id)
    except (DocumentNotFound, KeyError, TypeError, ValueError):
        return PageUpdate("That section is not in the library any more.", hidden, hidden)
    try:
        title = plain_heading(section_title(s, doc_id, node_id, node.title))
        pv = page_view(source, node, lines, title=title, what=what)
    except Exception as e:  # a damaged file must not take the answer view down
        log.exception("page view of document %s node %s failed", doc_id, node_id)
        return PageUpdate(f"The page could not be rendered ({md_text(type(e).__name__)}).",
                          hidden, hidden)
    if pv.png is not None:
        from PIL import Image  # noqa: PLC0415

        image = Image.open(io.BytesIO(pv.png))
        return PageUpdate(pv.caption, gr.update(value=image, visible=True), hidden)
    return PageUpdate(pv.caption, hidden, gr.update(value=pv.markdown, visible=True))


def quote_outputs(s: AppState, quote, not_covered: bool, mode: ModeTraits
                  ) -> tuple[dict, PageUpdate | None]:
    """The quote block, and its page with the quote highlighted (None: no page to show; the
    page view stays as it is) (app/views/quote_view.py)."""
    md = quote_markdown(quote, not_covered, mode.generates)
    if quote is None or quote.doc_id is None:
        return gr.update(value=md, visible=bool(md)), None
    return (gr.update(value=md, visible=True),
            page_outputs(s, quote.doc_id, quote.node_id, quote_lines(quote), what="passage"))


def quote_lines(quote) -> list[Line]:
    """What the page view highlights for a quote (``passage_lines``)."""
    return passage_lines(quote.text, quote.page, quote.score)


def passage_lines(text: str, page: int | None, score: float) -> list[Line]:
    """What the page view highlights for a passage: each of its lines apart, since they need
    not stand together on the page (a table row and its header; an entry's signature and the
    sentence of its description that answers)."""
    parts = [p for p in text.splitlines() if p.strip()]
    return [Line(p, page, score) for p in parts] or [Line(text, page, score)]
