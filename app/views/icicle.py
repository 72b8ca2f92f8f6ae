"""The whole manual as a Plotly icicle: every node of the routed tree, coloured by its routing
score on the routing tree's scale (grey: never scored, outlined: selected). Plain data in (an
``engine.routing.router.Route``); nothing here touches the model or the database."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from app.views.figures import COLORSCALE, ROOT_FILL, UNVISITED_FILL, score_range
from app.views.hover import esc, node_hover, score_label


def manual_figure(route, max_depth: int = 4) -> go.Figure:
    """Icicle of every node of the routed tree, coloured by routing score (grey: never scored)."""
    nodes = route.nodes
    lo, hi = score_range(route)
    sname = score_label(getattr(route, "router", None))
    scores = [n.score for n in nodes]
    norm = [(s - lo) / (hi - lo) if s is not None else None for s in scores]
    sampled = sample_colorscale(COLORSCALE, [v for v in norm if v is not None]) if any(
        v is not None for v in norm) else []
    it = iter(sampled)
    colors = []
    for n, v in zip(nodes, norm):
        if n.status == "root":
            colors.append(ROOT_FILL)
        elif v is None:
            colors.append(UNVISITED_FILL)
        else:
            colors.append(next(it))
    line_w = [3 if n.status == "selected" else 0.5 for n in nodes]
    # One entry per node of the manual (thousands): the arrays are built here, so plotly's
    # per-element validation (most of the time of a large icicle) is skipped.
    fig = go.Figure([dict(
        type="icicle", ids=[str(n.id) for n in nodes],
        parents=["" if n.parent is None else str(n.parent) for n in nodes],
        labels=[esc(n.title, 40) or f"#{n.id}" for n in nodes],
        marker=dict(colors=colors, line=dict(color=["#111827" if n.status == "selected"
                                                   else "white" for n in nodes], width=line_w)),
        hovertext=[node_hover(n, [], sname) for n in nodes], hoverinfo="text", maxdepth=max_depth,
        tiling=dict(orientation="v"), root=dict(color=ROOT_FILL), sort=False,
        meta={"kind": "manual"})], _validate=False)
    # an empty scatter carries the colour bar (icicle colours are given per node)
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", hoverinfo="skip",
                             showlegend=False, marker=dict(
                                 colorscale=COLORSCALE, cmin=lo, cmax=hi, color=[lo],
                                 showscale=True, colorbar=dict(title=dict(text=sname),
                                                               thickness=12))))
    fig.update_layout(title=dict(text="The whole manual (click a box to zoom; grey: not scored, "
                                      "outlined: selected)", x=0.01, font=dict(size=13)),
                      height=520, margin=dict(l=10, r=10, t=40, b=10),
                      xaxis=dict(visible=False), yaxis=dict(visible=False),
                      plot_bgcolor="white", paper_bgcolor="white")
    return fig
