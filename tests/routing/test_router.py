"""Routing (H2MT 3.3): per-parent top-k invariants on random trees, and the score itself; the
routed structure (``routing_tree``) and the trace (``trace``) as the walk fills them."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from engine.routing.router import route
from engine.routing.routing_tree import RoutingTree
from engine.routing.trace import PRUNED, ROOT_STATUS, SELECTED, UNVISITED, Route, WalkLimits
from engine.memory.projections import RouterProjections, normalise, centre
from engine.document.tree import ROOT, TreeAssembler

D = 16


@st.composite
def random_trees(draw):
    """A random tree (up to ~60 nodes) with random memories, as a RoutingTree."""
    n = draw(st.integers(min_value=1, max_value=60))
    asm = TreeAssembler("text", "T")
    ids = [ROOT]
    for _ in range(n):
        parent = draw(st.sampled_from(ids))
        ids.append(asm.add(parent, title=f"n{len(ids)}"))
    tree = asm.finish()
    seed = draw(st.integers(min_value=0, max_value=2**16))
    g = torch.Generator().manual_seed(seed)
    mem = {i: torch.randn(D, generator=g) for i in tree.graph.nodes}
    return tree, RoutingTree.from_tree(tree, mem, doc_id=1), torch.randn(D, generator=g)


@settings(max_examples=150, deadline=None)
@given(data=random_trees(), k=st.integers(1, 4),
       max_depth=st.one_of(st.none(), st.integers(1, 6)),
       budget=st.one_of(st.none(), st.integers(1, 20)))
def test_routing_invariants(data, k, max_depth, budget):
    tree, rtree, q = data
    r = route(rtree, q, RouterProjections(D, d_head=8), k=k, max_depth=max_depth, budget=budget)
    status = {n.id: n.status for n in r.nodes}
    assert status[ROOT] == ROOT_STATUS
    selected = set(r.selected)
    assert all(status[i] == SELECTED for i in selected)
    assert len(selected) == len(r.selected)
    for n in r.nodes:
        kids = rtree.children[n.id]
        # no parent has more than k selected children
        assert sum(status[c] == SELECTED for c in kids) <= k
        if n.status == SELECTED:
            # every selected node's parent is selected or is the root
            assert status[n.parent] in (SELECTED, ROOT_STATUS)
        if n.status in (PRUNED, UNVISITED):
            # nothing below a pruned (or unvisited) node is scored
            for d in tree.subtree_ids(n.id) - {n.id}:
                assert status[d] == UNVISITED and r.nodes[d].score is None
        if n.status == UNVISITED:
            assert n.score is None and n.prob is None and n.visit is None
        else:
            assert n.id == ROOT or n.score is not None
    if budget is not None:
        assert len(selected) <= budget
    if max_depth is not None:
        assert all(rtree.depth[i] <= max_depth for i in selected)
    # scored siblings' probabilities sum to one within each expanded parent
    for n in r.nodes:
        kids = rtree.children[n.id]
        if kids and all(r.nodes[c].prob is not None for c in kids):
            assert math.isclose(sum(r.nodes[c].prob for c in kids), 1.0, rel_tol=1e-5)
    # selected children of an expanded parent are its top-k by score
    for n in r.nodes:
        kids = [c for c in rtree.children[n.id] if r.nodes[c].score is not None]
        sel = [c for c in kids if status[c] == SELECTED]
        if sel and budget is None:
            worst_sel = min(r.nodes[c].score for c in sel)
            assert sum(r.nodes[c].score > worst_sel for c in kids) < k


def test_k_covers_all_children_selects_whole_tree_without_caps():
    asm = TreeAssembler("text", "T")
    a = asm.add(ROOT, title="a")
    asm.add(a, title="a1")
    asm.add(a, title="a2")
    asm.add(ROOT, title="b")
    tree = asm.finish()
    rtree = RoutingTree.from_tree(tree, {i: torch.randn(D) for i in tree.graph.nodes})
    r = route(rtree, torch.randn(D), RouterProjections(D, 8), k=5)
    assert sorted(r.selected) == [1, 2, 3, 4] and r.stop_reason == "leaves"


def test_score_is_scaled_dot_product_of_projections():
    """s(u|q) = (W_q q)^T (W_k m_u) / sqrt(d_h) on centred, normalised vectors."""
    proj = RouterProjections(D, d_head=4)
    torch.nn.init.normal_(proj.w_q.weight)
    torch.nn.init.normal_(proj.w_k.weight)
    q, m = torch.randn(D), torch.randn(5, D)
    want = (m @ proj.w_k.weight.T) @ (proj.w_q.weight @ q) / 2.0
    torch.testing.assert_close(proj.score(q, m), want)


def test_untrained_score_orders_like_cosine_of_centred_vectors():
    torch.manual_seed(0)
    proj = RouterProjections(64, d_head=64)
    m = torch.randn(40, 64)
    q = m[7] + 0.05 * torch.randn(64)
    mu = centre(m)
    s = proj.score(normalise(q, mu), normalise(m, mu))
    assert s.argmax().item() == 7


def test_library_route_has_virtual_root_over_documents():
    trees = {}
    for doc in (4, 9):
        asm = TreeAssembler("text", f"doc{doc}")
        asm.add(ROOT, title="x")
        asm.add(ROOT, title="y")
        t = asm.finish()
        trees[doc] = (t, {i: torch.randn(D) for i in t.graph.nodes})
    rtree = RoutingTree.from_library(trees)
    assert len(rtree) == 7 and rtree.children[0] == [1, 4] and rtree.title[0] == "Library"
    assert rtree.origin[1] == (4, 0) and rtree.origin[5] == (9, 1)
    r = route(rtree, torch.randn(D), RouterProjections(D, 8), k=1)
    assert len([i for i in r.selected if rtree.depth[i] == 1]) == 1


def test_bad_settings_are_refused():
    asm = TreeAssembler("text", "T")
    asm.add(ROOT, title="a")
    t = asm.finish()
    rtree = RoutingTree.from_tree(t, {i: torch.randn(D) for i in t.graph.nodes})
    with pytest.raises(ValueError):
        route(rtree, torch.randn(D), RouterProjections(D, 8), k=0)
    with pytest.raises(ValueError):
        route(rtree, torch.randn(D), RouterProjections(D, 8), budget=0)


@settings(max_examples=30, deadline=None)
@given(data=random_trees(), k=st.integers(1, 3))
def test_route_round_trips_through_its_records(data, k):
    """The query log stores as_records(); the history view rebuilds the same trace from it."""
    _, rtree, q = data
    r = route(rtree, q, RouterProjections(D, d_head=8), k=k)
    again = Route.from_records(r.as_records(), WalkLimits(k=k))
    assert again.as_records() == r.as_records()
    assert sorted(again.selected) == sorted(r.selected)
