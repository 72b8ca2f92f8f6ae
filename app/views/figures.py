"""The routing tree as a Plotly figure, and what it draws in plain counts (``figure_summary``).

Only plain data goes in (an ``engine.routing.router.Route`` and, optionally, an
``engine.answer.response.Answer`` for the gate loop counts); nothing here touches the model or
the database. The whole manual as an icicle is in ``app/views/icicle.py``, the hover text and the
escaping of titles in ``app/views/hover.py``, the same route as tables (scored nodes, and where the
fused and the memory router disagree) in ``app/views/route_tables.py``.

The routing tree shows what the router looked at: the root, every scored node (selected ones
bold on the selected path, pruned ones greyed with dashed edges) and, for every scored node
whose children were never scored, ONE collapsed marker "+N" standing for the N unvisited nodes
below it. A pruned node whose branch held one of the best nodes by own evidence (what flat
retrieval would have kept) is ringed in red (``strong_pruned``). A manual of 800+ nodes
therefore draws only the nodes the router actually scored. A run of a printed table of contents
or index (app/views/folds.py) that the router scored and pruned is drawn as ONE grey square saying
what it holds ("Contents (pp. 1–8, 46 parts)" in its hover). Which nodes are drawn, collapsed
or folded is ``app.views.visible_tree``'s. Hover text: one string per node.
"""
from __future__ import annotations

import math
from typing import Iterable

import plotly.graph_objects as go

from app.views.hover import branch_reason, esc, node_hover, score_label
from app.views.layout import tidy_layout
from app.views.tree_labels import Rows
from app.views.visible_tree import visible_tree
from engine.routing.fused import ROUTER_WORDS

COLORSCALE = "Viridis"
SELECTED_EDGE = "#111827"
PRUNED_EDGE = "#b6bcc6"
COLLAPSED_EDGE = "#d6dae0"
COLLAPSED_FILL = "#c7ccd4"
UNVISITED_FILL = "#eceef1"
ROOT_FILL = "#374151"
# How routing stopped (engine.routing.trace.Route.stop_reason), in the title's words.
STOPS = {"leaves": "stopped at the last level", "depth cap": "stopped at the deepest level asked",
         "budget": "stopped at the most sections asked"}
STATUSES = ("root", "selected", "pruned", "collapsed")
# Parents guessed by clustering (H2MT 4.3: a document without headings) are drawn as diamonds.
INDUCED_SYMBOL = "diamond"
# A pruned branch that held one of this many best nodes by own evidence (the nodes a flat
# retriever over the same evidence would rank first) is ringed: routing lost a strong hit there.
STRONG_HITS = 10
STRONG_RING = "#dc2626"
QUOTE_FILL = "#f59e0b"  # the star on the quote's section


def _symbols(nodes, ids: list[int]) -> list[str]:
    return [INDUCED_SYMBOL if getattr(nodes[i], "induced", False) else "circle" for i in ids]


# -- pruned branches that held a strong hit -------------------------------------------------------

def strong_pruned(route, top: int = STRONG_HITS) -> dict[int, list[tuple[int, int]]]:
    """Pruned nodes whose subtree holds one of the ``top`` best nodes ranked flat by their own
    fused evidence (``Route.pack_scores``, the score text mode packs by): pruned node ->
    [(rank from 1, hit node id)]. Empty for a route without own scores (one rebuilt from the
    query log). A hit the route selected, or one below an unvisited branch, marks nothing: only
    the pruned ancestor closest to the root is the branch the walk dropped."""
    pack = getattr(route, "pack_scores", None)
    if pack is None:
        return {}
    nodes, parent = route.nodes, route.tree.parent
    finite = [i for i in range(len(nodes)) if i and math.isfinite(float(pack[i]))]
    best = sorted(finite, key=lambda i: (-float(pack[i]), i))[:top]
    out: dict[int, list[tuple[int, int]]] = {}
    for rank, hit in enumerate(best, 1):
        path, u = [], hit
        while u is not None:
            path.append(u)
            u = parent[u]
        dropped = next((u for u in reversed(path) if nodes[u].status == "pruned"), None)
        if dropped is not None:
            out.setdefault(dropped, []).append((rank, hit))
    return out


def _strong_trace(route, pos: dict, strong: dict[int, list[tuple[int, int]]]) -> go.Scatter:
    nodes = route.nodes
    ids = sorted(strong)

    def hover(i: int) -> str:
        held = "<br>".join(f"#{r} best by own evidence: {esc(nodes[h].title, 60)}"
                           for r, h in strong[i][:3])
        more = f"<br>(+{len(strong[i]) - 3} more)" if len(strong[i]) > 3 else ""
        return (f"<b>pruned, but held a strong hit</b><br>{esc(nodes[i].title, 70)}<br>"
                f"{held}{more}")

    return go.Scatter(
        x=[pos[i][0] for i in ids], y=[pos[i][1] for i in ids], mode="markers",
        name="pruned, held a strong hit",
        marker=dict(symbol="circle-open", size=19, color=STRONG_RING, line=dict(width=2.5)),
        hovertext=[hover(i) for i in ids], hoverinfo="text",
        customdata=[[i, "strong-pruned", nodes[i].doc_id, nodes[i].node_id, strong[i][0][0]]
                    for i in ids],
        meta={"kind": "strong-pruned"})


def _quote_trace(route, pos: dict, quote) -> go.Scatter | None:
    """A star on the node the quote came from; a quote from a section the walk did not draw
    (found by the flat passage BM25) marks its nearest drawn ancestor, the hover says so."""
    nodes = route.nodes
    rid = getattr(quote, "rid", None)
    if rid is None or not 0 <= rid < len(nodes):
        return None
    at = rid
    while at is not None and at not in pos:
        at = nodes[at].parent
    if at is None:
        return None
    where = "" if at == rid else f"<br>(in {esc(nodes[rid].title, 70)}, not drawn: below here)"
    return go.Scatter(
        x=[pos[at][0]], y=[pos[at][1]], mode="markers", name="the quote's section",
        marker=dict(symbol="star", size=20, color=QUOTE_FILL, line=dict(color="#92400e", width=1.5)),
        hovertext=[f"<b>the quote came from here</b><br>{esc(nodes[at].title, 70)}{where}<br>"
                   f"found by: {esc(getattr(quote, 'channel', 'routed section'))}"],
        hoverinfo="text", customdata=[[rid, "quote", nodes[rid].doc_id, nodes[rid].node_id]],
        meta={"kind": "quote", "rid": rid})


# -- the routing tree ----------------------------------------------------------------------------

def gate_loops(answer, rid: int) -> list[int]:
    """The gate loop counts of routed node ``rid``'s memory slot, one per gated layer (ArcAligner
    3.4); empty when the answer ran no gate."""
    if answer is None or not getattr(answer, "gate", None):
        return []
    return list(answer.gate.get(rid, []))


def _edges(segments: Iterable[tuple[tuple[float, float], tuple[float, float]]]):
    xs, ys = [], []
    for (x0, y0), (x1, y1) in segments:
        xs += [x0, x1, None]
        ys += [y0, y1, None]
    return xs, ys


def score_range(route) -> tuple[float, float]:
    scores = [n.score for n in route.nodes if n.score is not None and math.isfinite(n.score)]
    if not scores:
        return 0.0, 1.0
    lo, hi = min(scores), max(scores)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def sibling_ranks(nodes) -> dict[int, tuple[int, int]]:
    """Each scored node's (rank, count) among its scored siblings, best score first."""
    by_parent: dict = {}
    for n in nodes:
        if n.score is not None and n.parent is not None:
            by_parent.setdefault(n.parent, []).append(n)
    out = {}
    for sibs in by_parent.values():
        for rank, n in enumerate(sorted(sibs, key=lambda x: -x.score), start=1):
            out[n.id] = (rank, len(sibs))
    return out


def route_figure(route, answer=None, title: str | None = None, folds=(),
                 trees: dict | None = None) -> go.Figure:
    """The routing tree of ``route`` (gate loops from ``answer`` when given) as a Plotly figure;
    ``folds``: runs of contents / index nodes drawn as one marker each (``visible_tree``);
    ``trees``: the manuals' Trees by document id, for printed page labels in the hovers."""
    vt = visible_tree(route, folds)
    nodes = route.nodes
    pos = tidy_layout(vt.children, root=0)
    lo, hi = score_range(route)
    sname = score_label(getattr(route, "router", None))
    trees = trees or {}

    place = sibling_ranks(nodes)

    def hover(i: int, node_loops: list[int]) -> str:  # printed page labels from the node's tree
        reason = branch_reason(nodes[i], *place[i], sname) if i in place else None
        return node_hover(nodes[i], node_loops, sname, trees.get(nodes[i].doc_id), reason)

    sel_seg, pr_seg, col_seg = [], [], []
    for parent, ch in vt.children.items():
        for c in ch:
            seg = (pos[parent], pos[c])
            if c < 0:
                col_seg.append(seg)
            elif nodes[c].status == "selected":
                sel_seg.append(seg)
            else:
                pr_seg.append(seg)
    traces = []
    for segs, color, width, dash, name in ((col_seg, COLLAPSED_EDGE, 1, "dot", "edges: collapsed"),
                                           (pr_seg, PRUNED_EDGE, 1, "dash", "edges: pruned"),
                                           (sel_seg, SELECTED_EDGE, 3.5, "solid", "selected path")):
        xs, ys = _edges(segs)
        traces.append(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", name=name,
                                 line=dict(color=color, width=width, dash=dash),
                                 showlegend=name == "selected path", meta={"kind": "edges"}))

    by_status: dict[str, list[int]] = {"root": [], "selected": [], "pruned": []}
    for rid in vt.visible:
        st = nodes[rid].status
        by_status["root" if st == "root" else st].append(rid)

    root_ids = by_status["root"]
    traces.append(go.Scatter(
        x=[pos[i][0] for i in root_ids], y=[pos[i][1] for i in root_ids], mode="markers+text",
        marker=dict(symbol="square", size=16, color=ROOT_FILL),
        text=[esc(nodes[i].title, 40) for i in root_ids], textposition="top center",
        hovertext=[hover(i, []) for i in root_ids], hoverinfo="text",
        name="root",
        customdata=[[i, "root", nodes[i].doc_id, nodes[i].node_id] for i in root_ids],
        meta={"status": "root"}, showlegend=False))

    pr = by_status["pruned"]
    traces.append(go.Scatter(
        x=[pos[i][0] for i in pr], y=[pos[i][1] for i in pr], mode="markers", name="pruned",
        marker=dict(size=9, color=[nodes[i].score for i in pr], coloraxis="coloraxis",
                    symbol=_symbols(nodes, pr),
                    opacity=0.45, line=dict(color=PRUNED_EDGE, width=1)),
        hovertext=[hover(i, []) for i in pr], hoverinfo="text",
        customdata=[[i, "pruned", nodes[i].doc_id, nodes[i].node_id] for i in pr],
        meta={"status": "pruned"}))

    sel = by_status["selected"]
    loops = {i: gate_loops(answer, i) for i in sel}
    labels = []
    for i in sel:  # every level labelled; a label that would overprint is left to the hover
        lab = esc(nodes[i].title, 20)
        if loops[i] and sum(loops[i]):
            lab = f"{lab} ⟳{sum(loops[i])}".strip()
        labels.append(lab)
    xs = [p[0] for p in pos.values()]
    rows = Rows(max(xs, default=0) - min(xs, default=0))
    labels = rows.place([pos[i][0] for i in sel], [pos[i][1] for i in sel], labels)
    traces.append(go.Scatter(
        x=[pos[i][0] for i in sel], y=[pos[i][1] for i in sel], mode="markers+text",
        name="selected",
        marker=dict(size=[15 + min(3 * sum(loops[i]), 18) for i in sel],
                    color=[nodes[i].score for i in sel], coloraxis="coloraxis",
                    symbol=_symbols(nodes, sel), line=dict(color=SELECTED_EDGE, width=2.5)),
        text=labels, textposition="bottom center", textfont=dict(size=10),
        hovertext=[hover(i, loops[i]) for i in sel], hoverinfo="text",
        customdata=[[i, "selected", nodes[i].doc_id, nodes[i].node_id, sum(loops[i])]
                    for i in sel],
        meta={"status": "selected"}))

    strong = strong_pruned(route)
    if strong:
        traces.append(_strong_trace(route, pos, strong))

    cm = sorted(vt.collapsed)
    traces.append(go.Scatter(
        x=[pos[m][0] for m in cm], y=[pos[m][1] for m in cm], mode="markers+text",
        name="unvisited (collapsed)",
        marker=dict(symbol="triangle-down", size=11, color=COLLAPSED_FILL,
                    line=dict(color="#9ca3af", width=1)),
        text=rows.place([pos[m][0] for m in cm], [pos[m][1] for m in cm],
                        [f"+{vt.collapsed[m][1]}" for m in cm]),
        textposition="bottom center",
        textfont=dict(size=9, color="#6b7280"),
        hovertext=[f"{vt.collapsed[m][1]} node(s) below, not scored (the router never reached "
                   f"them)<br>under <b>{esc(nodes[vt.collapsed[m][0]].title, 70)}</b>"
                   for m in cm],
        hoverinfo="text",
        customdata=[[m, "collapsed", vt.collapsed[m][0], vt.collapsed[m][1]] for m in cm],
        meta={"status": "collapsed"}))

    fm = sorted(vt.folded)
    if fm:  # only when there is one: a figure without folds keeps its four kinds of marker
        traces.append(go.Scatter(
            x=[pos[m][0] for m in fm], y=[pos[m][1] for m in fm], mode="markers+text",
            name="contents / index (folded)",
            marker=dict(symbol="square", size=11, color=UNVISITED_FILL,
                        line=dict(color="#9ca3af", width=1)),
            text=[esc(vt.folded[m][2].split(" (")[0]) for m in fm],
            textposition="bottom center", textfont=dict(size=9, color="#6b7280"),
            hovertext=[f"<b>{esc(vt.folded[m][2])}</b><br>folded: a printed table of contents "
                       "or index, left out of routing evidence and answers<br>under "
                       f"<b>{esc(nodes[vt.folded[m][0]].title, 70)}</b>" for m in fm],
            hoverinfo="text",
            customdata=[[m, "folded", vt.folded[m][0], vt.folded[m][1]] for m in fm],
            meta={"status": "folded"}))

    quote = _quote_trace(route, pos, getattr(answer, "quote", None)) if answer is not None else None
    if quote is not None:
        traces.append(quote)
    depth = max((-p[1] for p in pos.values()), default=0)
    router = getattr(route, "router", None)
    head = title or (f"Routing tree: {ROUTER_WORDS.get(router or 'memory', (router,))[0]}, "
                     f"{route.k} followed per level, {len(route.selected)} selected, "
                     f"{STOPS.get(route.stop_reason, route.stop_reason)}")
    fig = go.Figure(traces)
    fig.update_layout(
        title=dict(text=esc(head), x=0.01, font=dict(size=14)),
        coloraxis=dict(colorscale=COLORSCALE, cmin=lo, cmax=hi,
                       colorbar=dict(title=dict(text=sname), thickness=12, len=0.8)),
        height=int(200 + 95 * (depth + 1)), margin=dict(l=10, r=10, t=40, b=10),
        xaxis=dict(visible=False), yaxis=dict(visible=False),
        plot_bgcolor="white", paper_bgcolor="white", hovermode="closest",
        # under the tree: the title above has the whole width to itself
        legend=dict(orientation="h", yanchor="top", y=-0.02, xanchor="left", x=0.0),
        meta={"total_nodes": len(nodes), "selected_ids": list(route.selected),
              "router": router,
              "induced_drawn": sum(bool(getattr(nodes[i], "induced", False)) for i in vt.visible)})
    return fig


def figure_summary(fig: go.Figure | dict) -> dict:
    """What a routing-tree figure draws, as plain counts (for tests and the JSON view)."""
    d = fig.to_plotly_json() if isinstance(fig, go.Figure) else fig
    counts = {s: 0 for s in (*STATUSES, "folded")}
    collapsed_nodes = folded_nodes = 0
    collapsed_counts = []
    strong: list[int] = []
    for tr in d.get("data", []):
        if (tr.get("meta") or {}).get("kind") == "strong-pruned":
            strong = [int(row[0]) for row in tr.get("customdata") or []]
        st = (tr.get("meta") or {}).get("status")
        if st not in counts:
            continue
        cd = list(tr.get("customdata") if tr.get("customdata") is not None else [])
        counts[st] += len(cd)
        if st == "collapsed":
            collapsed_counts = [int(row[3]) for row in cd]
            collapsed_nodes = sum(collapsed_counts)
        elif st == "folded":
            folded_nodes = sum(int(row[3]) for row in cd)
    layout = d.get("layout", {})
    meta = layout.get("meta") or {}
    cax = layout.get("coloraxis") or {}
    return {"nodes": {s: counts[s] for s in ("root", "selected", "pruned")},
            "collapsed_markers": counts["collapsed"],
            "collapsed_nodes": collapsed_nodes,
            "collapsed_counts": collapsed_counts,
            "drawn_nodes": counts["root"] + counts["selected"] + counts["pruned"],
            "folded_markers": counts["folded"],  # runs of contents / index nodes
            "folded_nodes": folded_nodes,
            "represented_nodes": (counts["root"] + counts["selected"] + counts["pruned"]
                                  + collapsed_nodes + folded_nodes),
            "total_nodes": meta.get("total_nodes"),
            "strong_pruned": strong,  # pruned nodes ringed: their branch held a strong hit
            "colorbar": bool(cax.get("colorbar")) and cax.get("showscale", True) is not False}


