"""Routers side by side (``python -m bench.qa --routers fused,memory,lexical,dense``).

Per question and router: the engine's route (mode ``route``, the router chosen), then the text
mode's context packed from it (``engine.answer.modes.pack_context``, the same budget as text
mode). Beside them, three flat retrievers over the SAME nodes and evidence (the stored lexical
tokens and sentence-encoder vectors; tables of contents and indexes left out as the routers
leave them out), with the same node budget (n = the number of nodes the fused route selected)
and the same context budget:
- ``flat-bm25``  BM25 over every node (the engine's lexical index);
- ``flat-dense`` cosine over every node (the engine's encoder);
- ``flat-rrf``   reciprocal rank fusion of the two (k = 60, Cormack et al. 2009).

Reported per row: ``hit`` (a gold item reached by a selected / retrieved node), ``full`` (all
gold items reached), ``ctx_hit`` (reached by a node whose text is in the packed context) and
``hit3`` (reached by one of the first three nodes of that context, i.e. the three the answer
reads first).
"""
from __future__ import annotations

import time

import numpy as np

from bench.metrics import routing_hit
from engine.answer.modes import Context, pack_context
from engine.ask import AskError, AskOptions, ask, load_documents
from engine.routing import lexical
from engine.routing.router import RoutingTree

RRF_K = 60
FLAT = ("flat-bm25", "flat-dense", "flat-rrf")


def _hits(row: dict, regions: list[set[int]], selected: list[int], used: list[int]) -> None:
    h = routing_hit(selected, regions)
    row.update(hit=h.hit, full=h.full, coverage=h.coverage, selected=selected,
               n_selected=len(selected), used=used,
               ctx_hit=routing_hit(used, regions).hit if used is not None else None,
               hit3=routing_hit(used[:3], regions).hit if used is not None else None)


def router_row(runner, q, router: str, k: int) -> dict:
    """The engine's route with ``router`` and the text context packed from it."""
    rt = runner.rt
    try:
        ans = ask(rt, q.doc_id, q.question, AskOptions(mode="route", router=router, k=k),
                  log=False)
    except AskError as e:  # e.g. the memory router while memories are being written
        row = runner._base(q, f"route[{router}]", k)
        row["skipped"] = str(e)
        return row
    route = ans.route
    ctx = Context(backbone=rt.backbone, parts=rt.parts, routing=route.tree,
                  trees={q.doc_id: runner.tree(q.doc_id)}, text_budget=runner.args.text_budget)
    _, cited = pack_context(ctx, route)
    row = runner._base(q, f"route[{router}]", k)
    row.update(route_ms=ans.metrics.route_ms, scored=route.scored)
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
        used = _pack(tree, order, rt.backbone.encode, runner.args.text_budget)
        row = runner._base(q, name, n)
        row["route_ms"] = ms[name]
        _hits(row, q.regions, got, used)
        rows.append(row)
    return rows


def _pack(tree, order: list[int], encode, budget: int) -> list[int]:
    """Nodes in ranking order whose text fits the budget (as text mode packs its context)."""
    used, total = [], 0
    for nid in order:
        text = tree.node(nid).local_text
        if not text.strip():
            continue
        k = len(encode(text))
        if total + k > budget:
            continue
        total += k
        used.append(nid)
        if total >= budget - 8:
            break
    return used
