"""Routers side by side (``python -m bench.qa --routers fused,memory,lexical,dense``).

Per question and router: the engine's route (mode ``route``, the router chosen), then the text
mode's context packed from it (``engine.answer.passages.sections.pack_context``, the same budget as text
mode). Beside them, three flat retrievers over the SAME nodes and evidence (the stored lexical
tokens and sentence-encoder vectors; tables of contents and indexes left out as the routers
leave them out), with the same node budget (n = the number of nodes the fused route selected)
and the same context budget, their first n nodes packed by the engine's ``pack_blocks`` exactly
as the route's selection is (until issue 24's second session the flat rows counted a node's
body without its heading path and could reach past their first n nodes to fill the budget):
- ``flat-bm25``  BM25 over every node (the engine's lexical index);
- ``flat-dense`` cosine over every node (the engine's encoder);
- ``flat-rrf``   reciprocal rank fusion of the two (k = 60, Cormack et al. 2009).

Reported per row: ``hit`` (a gold item reached by a selected / retrieved node), ``full`` (all
gold items reached), ``ctx_hit`` (reached by a node whose text is in the packed context) and
``hit3`` (reached by one of the first three nodes of that context, i.e. the three the answer
reads first).

A router may name its walk: ``fused/topk`` is the fused router on the walk before issue 24
(``engine.routing.fused.WALKS``); a bare name takes the settings' walk. Each route row also
says where the route lost its gold (``lost_depth``, ``lost_as``: see ``gold_loss``), which
bench.qa's summary counts per depth.
"""
from __future__ import annotations

import time

import numpy as np

from bench.metrics import routing_hit
from engine.answer.passages.sections import pack_blocks, pack_context
from engine.ask import AskError, AskOptions, ask, load_documents
from engine.routing import lexical
from engine.routing.fused import ROUTERS, WALKS
from engine.routing.router import Route, RoutingTree

RRF_K = 60
FLAT = ("flat-bm25", "flat-dense", "flat-rrf")


def _hits(row: dict, regions: list[set[int]], selected: list[int], used: list[int]) -> None:
    h = routing_hit(selected, regions)
    row.update(hit=h.hit, full=h.full, coverage=h.coverage, selected=selected,
               n_selected=len(selected), used=used,
               ctx_hit=routing_hit(used, regions).hit if used is not None else None,
               hit3=routing_hit(used[:3], regions).hit if used is not None else None)


def parse_router(spec: str) -> tuple[str, str | None]:
    """``fused`` -> (fused, None: the settings' walk); ``fused/topk`` -> (fused, topk)."""
    router, _, how = spec.partition("/")
    if router not in ROUTERS or (how and how not in WALKS):
        raise ValueError(f"unknown router {spec!r}: a router of {', '.join(ROUTERS)}, "
                         f"optionally /<walk> with a walk of {', '.join(WALKS)}")
    return router, how or None


def gold_loss(route: Route, regions: list[set[int]]) -> tuple[int | None, str | None]:
    """Where the route lost the gold that got furthest down the tree: (depth, status) of the
    first node on the root-to-gold path that was not selected, the deepest such over the gold
    items' top nodes (a region's nodes whose parent lies outside it); (None, None) when a
    selected node reaches some gold. ``status`` is ``pruned`` (scored, not kept: per-parent
    top-k or the node budget) or ``unvisited`` (its parent was never expanded: a depth cap)."""
    sel = set(route.selected)
    routed = {(d, n): i for i, (d, n) in enumerate(route.tree.origin)}
    doc = route.tree.origin[-1][0]
    ids = [[routed[(doc, n)] for n in r if (doc, n) in routed] for r in regions]
    if not ids or any(sel.intersection(r) for r in ids):
        return None, None
    best: tuple[int, str] | None = None
    parent = route.tree.parent
    for region in ids:
        inside = set(region)
        for g in region:
            if parent[g] in inside:
                continue
            path = [g]
            while parent[path[-1]] is not None:
                path.append(parent[path[-1]])
            lost = next(u for u in reversed(path) if u not in sel and parent[u] is not None)
            here = (route.tree.depth[lost], route.status(lost))
            if best is None or here[0] > best[0]:
                best = here
    return best if best is not None else (None, None)


def router_row(runner, q, spec: str, k: int) -> dict:
    """The engine's route with router ``spec`` (``parse_router``) and the text context packed
    from it."""
    rt = runner.rt
    router, how = parse_router(spec)
    try:
        ans = ask(rt, q.doc_id, q.question, AskOptions(mode="route", router=router, k=k,
                                                       walk=how), log=False)
    except AskError as e:  # e.g. the memory router while memories are being written
        row = runner._base(q, f"route[{spec}]", k)
        row["skipped"] = str(e)
        return row
    route = ans.route
    _, cited = pack_context({q.doc_id: runner.tree(q.doc_id)}, route, rt.backbone.encode,
                            runner.args.text_budget)
    row = runner._base(q, f"route[{spec}]", k)
    row.update(route_ms=ans.metrics.route_ms, walk_ms=route.route_ms, scored=route.scored,
               walk=route.walk)
    row["lost_depth"], row["lost_as"] = gold_loss(route, q.regions)
    _hits(row, q.regions, [route.nodes[i].node_id for i in route.selected],
          [route.nodes[i].node_id for i in cited])
    return row


def _flat_order(scores: np.ndarray, keep: np.ndarray) -> list[int]:
    idx = np.flatnonzero(keep)
    return idx[np.lexsort((idx, -scores[idx]))].tolist()


def flat_rows(runner, q, n: int) -> list[dict]:
    """flat-bm25, flat-dense, flat-rrf over the document's evidence, n nodes each."""
    rt = runner.rt
    doc = load_documents(rt, [q.doc_id])[q.doc_id]
    rtree: RoutingTree = runner.flat_tree(q.doc_id, doc)
    keep = rtree.has_evidence
    t0 = time.perf_counter()
    bm25 = np.asarray(rtree.lexical_index().scores(lexical.tokenize(q.question)), np.float32)
    orders = {"flat-bm25": _flat_order(bm25, keep)}
    ms = {"flat-bm25": (time.perf_counter() - t0) * 1e3}
    if rtree.dense is not None and rt.encoder is not None:
        t0 = time.perf_counter()
        dense = rtree.dense @ rt.encoder.encode_query(q.question)
        orders["flat-dense"] = _flat_order(dense.astype(np.float32), keep)
        ms["flat-dense"] = (time.perf_counter() - t0) * 1e3
        rrf = np.zeros(len(rtree), np.float32)
        for order in (orders["flat-bm25"], orders["flat-dense"]):
            rrf[order] += 1.0 / (RRF_K + np.arange(1, len(order) + 1))
        orders["flat-rrf"] = _flat_order(rrf, keep)
        ms["flat-rrf"] = ms["flat-bm25"] + ms["flat-dense"]
    tree = runner.tree(q.doc_id)
    rows = []
    for name, order in orders.items():
        got = order[:n]
        used = _pack(tree, got, rt.backbone.encode, runner.args.text_budget)
        row = runner._base(q, name, n)
        row["route_ms"] = ms[name]
        _hits(row, q.regions, got, used)
        rows.append(row)
    return rows


def _pack(tree, order: list[int], encode, budget: int) -> list[int]:
    """The nodes of ``order`` (a flat retriever's first n) whose blocks fit the budget, packed by
    the engine's own ``pack_blocks``, as the route's context is: the same block format (heading
    path and page before the body), the same budget and the same skips, so ctx_hit compares
    rankings and not two ways of counting tokens."""
    _, kept = pack_blocks(encode, budget, [(tree, nid) for nid in order])
    return [order[j] for j in kept]
