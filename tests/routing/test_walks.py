"""The walks of issue 24 (engine.routing.fused.WALKS): fusing at the nodes before propagating,
rescuing the ancestors of the best flat-ranked nodes, and the paper's walk kept unchanged."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from engine.routing.channels import TreeLevels, channel
from engine.routing.fused import WALKS, RouteBy, RouteQuery, RouterUnavailable, route_on_evidence
from engine.routing.fusion import RESCUE, fuse, walk_scores
from engine.routing.router import RoutingTree, WalkLimits, walk


def _tree(parent: list[int | None]) -> RoutingTree:
    depth: list[int] = []
    for p in parent:
        depth.append(0 if p is None else depth[p] + 1)
    n = len(parent)
    return RoutingTree(parent=list(parent),
                       children=[[c for c in range(n) if parent[c] == i] for i in range(n)],
                       depth=depth, title=[f"n{i}" for i in range(n)], pages=[(None, None)] * n,
                       origin=[(1, i) for i in range(n)], memories=None)


# root 0 -> chapters 1, 2; chapter 1 -> 3 (many words matched, meaning off), 4 (meaning only);
# chapter 2 -> 5 (good on both, best fused on its own), 6 (poor).
SPLIT = [None, 0, 0, 1, 1, 2, 2]
LEX = np.array([np.nan, 0.0, 0.0, 9.0, 0.0, 6.0, 0.0], np.float32)
DEN = np.array([np.nan, 0.0, 0.0, 0.0, 0.9, 0.6, 0.0], np.float32)


def _split_scores():
    tree = _tree(SPLIT)
    chans = {"lexical": channel(LEX, tree.levels), "dense": channel(DEN, tree.levels)}
    return tree, fuse(chans)


def test_leaf_fusion_keeps_the_chapter_of_the_best_fused_section():
    tree, (fused, pack) = _split_scores()
    assert int(np.nanargmax(pack)) == 5  # node 5 is the best section on the fused own score
    # the paper's order (propagate each channel, then fuse) prefers chapter 1: it collects the
    # lexical best of node 3 and the dense best of node 4
    score, keep = walk_scores(tree, fused, pack, "topk")
    assert not keep and walk(tree, lambda k: score[k].tolist(), WalkLimits(k=1))[3] == [1, 3]
    score, keep = walk_scores(tree, fused, pack, "leaf")
    assert not keep and walk(tree, lambda k: score[k].tolist(), WalkLimits(k=1))[3] == [2, 5]
    assert score[2] == pytest.approx(pack[5])  # the chapter is its best section


def test_rescue_keeps_the_paths_to_the_best_flat_nodes():
    tree, (fused, pack) = _split_scores()
    score, keep = walk_scores(tree, fused, pack, "rescue")
    assert {0, 2, 5} <= keep  # node 5's path
    sel = walk(tree, lambda k: score[k].tolist(), WalkLimits(k=1), keep)[3]
    assert {1, 3, 2, 5} <= set(sel)  # the top-k winners and the rescued path


def test_unknown_walk_is_refused():
    """A route asked for an unknown walk is refused in one line; a walk's score for one is a
    programming error."""
    tree, (fused, pack) = _split_scores()
    tree.dense = np.eye(len(SPLIT), 4, dtype=np.float32)
    with pytest.raises(RouterUnavailable, match="unknown walk 'beam'"):
        route_on_evidence(tree, RouteQuery(dense=np.ones(4, np.float32)), None,
                          RouteBy(walk="beam"))
    with pytest.raises(ValueError, match="unknown walk"):
        walk_scores(tree, fused, pack, "beam")


@st.composite
def scored_trees(draw):
    n = draw(st.integers(min_value=2, max_value=60))
    parent: list[int | None] = [None] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
    lex = draw(st.lists(st.one_of(st.floats(0, 10), st.just(math.nan)), min_size=n, max_size=n))
    den = draw(st.lists(st.floats(-1, 1), min_size=n, max_size=n))
    lex[0] = den[0] = math.nan
    return parent, np.array(lex, np.float32), np.array(den, np.float32)


@settings(max_examples=100, deadline=None)
@given(data=scored_trees(), k=st.integers(1, 3), how=st.sampled_from(WALKS))
def test_walk_invariants(data, k, how):
    """Every walk selects a connected set from the root; the rescue walks reach the RESCUE best
    flat nodes; a walk without rescue keeps at most k children per parent; topk ranks by the
    fused subtree score and the leaf walks by the propagated fused own score."""
    parent, lex, den = data
    tree = _tree(parent)
    tree.dense = None
    chans = {"lexical": channel(lex, tree.levels), "dense": channel(den, tree.levels)}
    fused, pack = fuse(chans)
    score, keep = walk_scores(tree, fused, pack, how)
    sel = walk(tree, lambda kids: score[kids].tolist(), WalkLimits(k=k), keep)[3]
    chosen = set(sel)
    assert all(parent[u] == 0 or parent[u] in chosen for u in sel)
    if how.endswith("rescue"):
        best = sorted(range(1, len(parent)), key=lambda i: (-pack[i], i))[:RESCUE]
        assert set(best) <= chosen
    else:
        for p in chosen | {0}:
            assert sum(1 for u in sel if parent[u] == p) <= k
    expect = TreeLevels(parent, tree.depth).propagate_max(pack) if how.startswith("leaf") \
        else fused
    assert np.array_equal(score, expect, equal_nan=True)


def test_walks_on_a_real_manual(corpus_tree):
    """etoolbox with its real lexical evidence: the rescue walk selects the best BM25 sections
    that the paper's walk prunes, and topk is the walk without rescue."""
    from engine.document.hygiene import mark_evidence_hygiene
    from engine.routing import lexical
    from engine.routing.evidence import compute_evidence

    tree = mark_evidence_hygiene(corpus_tree("etoolbox-manual.pdf"))
    rtree = RoutingTree.from_tree(tree, None, doc_id=1, evidence=compute_evidence(tree, None))
    questions = ["How do I patch a command?", "How can I make a command robust?",
                 "list processing loop over a comma separated list",
                 "How do I add code at the end of the preamble?", "boolean flags toggle"]
    gained = 0
    for q in questions:
        query = RouteQuery(tokens=lexical.tokenize(q))
        old = route_on_evidence(rtree, query, None, RouteBy(walk="topk"))
        new = route_on_evidence(rtree, query, None, RouteBy(walk="rescue"))
        assert old.walk == "topk" and new.walk == "rescue"
        assert set(old.selected) <= set(new.selected)  # rescue only adds
        order = np.argsort(-np.nan_to_num(new.pack_scores, nan=-np.inf), kind="stable")
        best = [int(i) for i in order[:RESCUE]]
        assert set(best) <= set(new.selected)
        gained += len(set(best) - set(old.selected))
        # the node budget still caps what any walk selects
        capped = route_on_evidence(rtree, query, None, RouteBy(
            walk="rescue", limits=WalkLimits(budget=10)))
        assert len(capped.selected) <= 10
    assert gained > 0  # the paper's walk pruned some of the best sections


def test_the_walk_is_a_checked_setting():
    from engine.settings import Settings, SettingsError

    assert Settings().walk == WALKS[0]
    assert Settings.from_env({"H2MT_WALK": "topk"}).walk == "topk"
    with pytest.raises(SettingsError, match="H2MT_WALK='beam' is not one of"):
        Settings.from_env({"H2MT_WALK": "beam"})
