"""Which nodes of a route the routing tree draws: scored nodes, collapsed markers, folded runs."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class VisibleTree:
    """The nodes drawn: scored nodes plus one collapsed marker per unexpanded scored node.

    Collapsed markers get negative ids ``-(parent + 1)``; ``collapsed[marker] = (parent, count)``.
    """

    children: dict[int, list[int]] = field(default_factory=dict)
    collapsed: dict[int, tuple[int, int]] = field(default_factory=dict)
    visible: list[int] = field(default_factory=list)  # real node ids drawn, document order
    # Folded runs of contents / index nodes (app/views/folds.py): marker -> (parent, count, label)
    folded: dict[int, tuple[int, int, str]] = field(default_factory=dict)


def marker_id(parent: int) -> int:
    return -(parent + 1)


def fold_marker_id(first: int, n_nodes: int) -> int:
    """A folded run's marker, below every collapsed marker's id."""
    return -(n_nodes + 1 + first + 1)


def visible_tree(route, folds=()) -> VisibleTree:
    """Which nodes of ``route`` are drawn and how unvisited subtrees are collapsed.

    ``folds`` (app.views.folds.Fold, in the route's ids): a run of contents or index nodes drawn
    as siblings, every one of them pruned, is drawn as ONE marker standing for the run (and the
    unvisited nodes below it); a run with a selected node is drawn as it is."""
    nodes = route.nodes
    kids: dict[int, list[int]] = {}
    for n in nodes:
        if n.parent is not None:
            kids.setdefault(n.parent, []).append(n.id)
    for ch in kids.values():
        ch.sort()  # ids follow document order within a parent
    # subtree sizes, deepest first (no recursion)
    size = [1] * len(nodes)
    for n in sorted(nodes, key=lambda n: -n.depth):
        if n.parent is not None:
            size[n.parent] += size[n.id]
    vt = VisibleTree()
    for n in nodes:
        if n.status == "unvisited":
            continue
        vt.visible.append(n.id)
        ch = kids.get(n.id, [])
        if not ch:
            continue
        shown = [c for c in ch if nodes[c].status != "unvisited"]
        hidden = sum(size[c] for c in ch if nodes[c].status == "unvisited")
        if hidden:
            m = marker_id(n.id)
            vt.collapsed[m] = (n.id, hidden)
            shown.append(m)
        vt.children[n.id] = shown
    for f in folds:
        members = set(f.members)
        shown = vt.children.get(f.parent, [])
        if (not members <= set(shown)
                or any(nodes[i].status != "pruned" for i in f.members)
                or any(c >= 0 for i in f.members for c in vt.children.get(i, []))):
            continue  # not drawn, or drawn with something to show: left as it is
        m = fold_marker_id(f.first, len(nodes))
        at = shown.index(f.first)
        vt.children[f.parent] = [*[c for c in shown[:at] if c not in members], m,
                                 *[c for c in shown[at:] if c not in members]]
        for i in f.members:
            vt.children.pop(i, None)
            vt.collapsed.pop(marker_id(i), None)
        vt.visible = [i for i in vt.visible if i not in members]
        vt.folded[m] = (f.parent, len(f.ids), f.title)
    return vt
