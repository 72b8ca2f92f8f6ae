"""The words of a routing figure: each node's hover text, the score's name, page labels and the
escaping every title goes through (shared by the routing tree, app/views/figures.py, and the icicle,
app/views/icicle.py).

Hover text: every scored node lists its evidence channels in plain words ("words matched",
"meaning", "memory"), each with the node's own score and its subtree's best ("best in branch",
what the router compares), then the score the router ranked by (the fused score, unless one
channel routed alone).

Every title is HTML-escaped before it reaches Plotly: its hover and label text is HTML-like
(``<b>``, ``<br>``, links), so a heading such as ``<script>`` must arrive as ``&lt;script&gt;``.
"""
from __future__ import annotations

import html


from engine.document.tree import pages_name
from engine.routing.channels import CHANNELS, LABELS

# Parents guessed by clustering (H2MT 4.3: a document without headings) say so in their hover.
INDUCED_NOTE = "induced: grouped by similarity, the title is guessed (no heading in the file)"


def esc(text: str | None, limit: int | None = None) -> str:
    """Plain text -> text safe inside Plotly's HTML-like labels (cut to ``limit`` chars first)."""
    t = " ".join((text or "").split())
    if limit is not None and len(t) > limit:
        t = t[: limit - 1] + "…"
    return html.escape(t, quote=True)


def pages_label(start: int | None, end: int | None, tree=None) -> str:
    """Pages as shown: printed labels first where ``tree`` (a Tree) knows them
    ("p. 8 (PDF page 10)"), else physical numbers ("pp. 3–5")."""
    if tree is not None:
        return tree.pages_name(start, end)
    return pages_name(start, end)


def score_label(router: str | None) -> str:
    """What a route's node score is, in plain words (the colour bar's and the hover's name)."""
    if router in (None, "fused"):
        return "fused score"
    return f"score ({LABELS.get(router, router)} alone)"


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def channel_lines(channels: dict | None) -> list[str]:
    """One hover line per evidence channel: own score and best in branch (subtree) score."""
    if not channels:
        return []
    out = []
    for name in CHANNELS:
        ch = channels.get(name)
        if ch is None:
            continue
        own, sub = ch.get("own"), ch.get("subtree")
        label = LABELS[name]
        if own is None and sub is None:
            out.append(f"{label}: no evidence")
        else:
            out.append(f"{label}: own {_num(own)}, best in branch {_num(sub)}")
    return out


def branch_reason(n, rank: int, of: int, score_name: str = "score") -> str | None:
    """Why the walk followed a branch or left it, in one line: the node's place among its
    siblings by the score the router ranked by, and its strongest kind of evidence (the best
    in its branch, what the router compares). None for a node the router did not score."""
    if n.score is None or n.status not in ("selected", "pruned"):
        return None
    verb = "followed" if n.status == "selected" else "left"
    line = f"why {verb}: {rank} of {of} under its parent by {score_name}"
    best = [(ch.get("subtree"), name) for name, ch in (getattr(n, "channels", None) or {}).items()
            if ch.get("subtree") is not None and name in LABELS]
    if best:
        value, name = max(best)
        line += f"; strongest evidence: {LABELS[name]} ({value:.2f})"
    return line


def node_hover(n, loops: list[int], score_name: str = "score", tree=None,
               reason: str | None = None) -> str:
    """A routed node's hover text; ``tree``: its manual's Tree, for printed page labels;
    ``reason``: why the walk followed or left it (``branch_reason``)."""
    lines = [f"<b>{esc(n.title, 90) or '(untitled)'}</b>",
             f"status: {n.status}",
             f"pages: {pages_label(n.page_start, n.page_end, tree)}",
             f"depth: {n.depth}"]
    if getattr(n, "induced", False):
        lines.append(INDUCED_NOTE)
    if n.score is None:
        lines.append("the root: not scored" if n.status == "root"
                     else "not scored (the router never reached it)")
    else:
        lines.append(f"{score_name}: {n.score:.3f}")
        if reason:
            lines.append(reason)
        lines.extend(channel_lines(getattr(n, "channels", None)))
    if n.prob is not None:
        lines.append(f"probability in parent: {n.prob:.3f}")
    if n.visit is not None:
        lines.append(f"visit order: {n.visit}")
    if loops:
        per_layer = ", ".join(f"L{j}: {v}" for j, v in enumerate(loops))
        lines.append(f"gate loops: {sum(loops)} ({per_layer})")
    lines.append(f"node id: {n.id}")
    return "<br>".join(lines)
