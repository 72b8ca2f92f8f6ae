"""Routing on evidence: max-propagation, z-score fusion, a missing channel left out, and the
fused walk's trace (engine.routing.channels, fusion, fused)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from engine.document.tree import ROOT, TreeAssembler
from engine.memory.projections import RouterProjections
from engine.routing.channels import ChannelScores, TreeLevels, channel
from engine.routing.fused import RouteBy, RouteQuery, RouterUnavailable, route_on_evidence
from engine.routing.fusion import MISSING_Z, FusionWeights, fuse, zscore
from engine.routing.router import SELECTED, RoutingTree, WalkLimits
from storage import NodeEvidence

TOPK_1 = RouteBy(walk="topk", limits=WalkLimits(k=1))  # the paper's walk, one child a parent


@st.composite
def random_parents(draw):
    n = draw(st.integers(min_value=1, max_value=80))
    parent: list[int | None] = [None]
    for i in range(1, n + 1):
        parent.append(draw(st.integers(0, i - 1)))
    own = draw(st.lists(st.one_of(st.floats(-5, 5), st.just(math.nan)), min_size=n + 1,
                        max_size=n + 1))
    return parent, np.array(own, dtype=np.float32)


def _depths(parent):
    depth = []
    for p in parent:
        depth.append(0 if p is None else depth[p] + 1)
    return depth


@settings(max_examples=200, deadline=None)
@given(data=random_parents())
def test_max_propagation_is_the_subtree_max(data):
    parent, own = data
    levels = TreeLevels(parent, _depths(parent))
    sub = levels.propagate_max(own)
    children = {i: [] for i in range(len(parent))}
    for i, p in enumerate(parent):
        if p is not None:
            children[p].append(i)

    def subtree(i):
        out = [i]
        for c in children[i]:
            out += subtree(c)
        return out
    for i in range(len(parent)):
        vals = own[subtree(i)]
        vals = vals[np.isfinite(vals)]
        if len(vals):
            assert sub[i] == pytest.approx(vals.max())
        else:
            assert math.isnan(sub[i])


def test_zscore_and_missing_values():
    z = zscore(np.array([1.0, 2.0, 3.0, np.nan], dtype=np.float32))
    assert z[:3].mean() == pytest.approx(0.0, abs=1e-6)
    assert z[3] == MISSING_Z and z[3] <= z[:3].min()
    assert (zscore(np.array([np.nan, np.nan])) == MISSING_Z).all()
    assert (zscore(np.array([2.0, 2.0])) == 0).all()  # constant: no division by zero


def test_a_missing_channel_is_left_out_not_zeroed():
    own_a = np.array([np.nan, 1.0, 5.0, 2.0], dtype=np.float32)
    own_b = np.array([np.nan, 3.0, 0.0, 1.0], dtype=np.float32)
    a = ChannelScores(own_a, own_a.copy())
    b = ChannelScores(own_b, own_b.copy())
    only_a, _ = fuse({"lexical": a})
    both, _ = fuse({"lexical": a, "dense": b})
    # left out: the fused score is exactly the remaining channel's z-score
    np.testing.assert_allclose(only_a, zscore(own_a), rtol=1e-6)
    assert not np.allclose(only_a, both)
    # a zeroed channel would instead shift every node by the same constant... or rank differently
    zeroed = ChannelScores(np.zeros(4, np.float32), np.zeros(4, np.float32))
    z, _ = fuse({"lexical": a, "dense": zeroed})
    np.testing.assert_allclose(z, only_a, rtol=1e-6)  # z of a constant is 0: same as left out
    with pytest.raises(ValueError):
        fuse({})


def test_fusion_weights_round_trip(tmp_path):
    w = FusionWeights(subtree={"lexical": 0.7, "dense": 1.3, "memory": 0.1},
                      own={"lexical": 0.2, "dense": 0.0, "memory": 0.0}, source="test")
    w.to_json(tmp_path / "f.json")
    back = FusionWeights.from_json(tmp_path / "f.json")
    assert back == w
    (tmp_path / "bad.json").write_text('{"subtree": {"colour": 1}, "own": {}}')
    with pytest.raises(ValueError, match="unknown channels"):
        FusionWeights.from_json(tmp_path / "bad.json")


def _manual():
    """A small manual: the answer sits deep in the second chapter."""
    asm = TreeAssembler("markdown", "Pump manual")
    c1 = asm.add(ROOT, title="Installation", text="Unpack the pump and mount it on the wall.")
    asm.add(c1, title="Electrical", text="Connect the motor cable to the mains terminal.")
    c2 = asm.add(ROOT, title="Operation", text="Daily use of the pump.")
    s = asm.add(c2, title="Display", text="The display shows the pressure.")
    asm.add(s, title="Fault codes", text="E1 means the valve is closed; E2 means overheating.")
    asm.add(ROOT, title="Contents", text="Installation . . . . 3\nOperation . . . . 5",
            kind="toc")
    return asm.finish()


def _evidence(tree):
    from engine.routing.evidence import compute_evidence

    # Real lexical tokens; the dense vectors are bag-of-words vectors built here, so the test
    # checks the fusion and the walk, not the sentence encoder (tests/routing/test_dense.py).
    ev = compute_evidence(tree, None)
    vocab = sorted({t for toks in ev.tokens for t in toks})
    vec = np.zeros((len(tree), len(vocab)), np.float32)
    for i, toks in enumerate(ev.tokens):
        for t in toks:
            vec[i, vocab.index(t)] += 1
    norms = np.linalg.norm(vec, axis=1, keepdims=True)
    vec = np.divide(vec, norms, out=np.zeros_like(vec), where=norms > 0)
    return NodeEvidence(ev.tokens, vec, ev.fingerprint), vocab


def test_fused_walk_finds_the_deep_section_and_traces_every_channel():
    from engine.routing import lexical

    tree = _manual()
    ev, vocab = _evidence(tree)
    g = torch.Generator().manual_seed(0)
    mem = {i: torch.randn(8, generator=g) for i in tree.graph.nodes}
    rtree = RoutingTree.from_tree(tree, mem, doc_id=1, evidence=ev)
    assert rtree.available_channels() == ("lexical", "dense", "memory")
    q_tokens = lexical.tokenize("What does fault code E1 mean?")
    q_dense = np.array([q_tokens.count(t) for t in vocab], np.float32)
    q_dense /= np.linalg.norm(q_dense)
    query = RouteQuery(tokens=q_tokens, dense=q_dense, memory=torch.randn(8, generator=g))
    r = route_on_evidence(rtree, query, RouterProjections(8, d_head=4), TOPK_1)
    titles = [tree.node(i).title for i in r.selected]
    assert titles == ["Operation", "Display", "Fault codes"]
    # the parent's subtree score is its best descendant's, not its own
    lex = r.channels["lexical"]
    op = titles.index("Operation")
    assert lex.subtree[r.selected[op]] == pytest.approx(lex.own[r.selected[-1]])
    assert lex.own[r.selected[op]] < lex.subtree[r.selected[op]]
    # the table of contents has no evidence, so it never wins on repeated titles
    toc = next(n.id for n in tree.preorder() if n.kind == "toc")
    assert math.isnan(lex.own[toc]) and r.nodes[toc].status != SELECTED
    rec = r.nodes[r.selected[-1]].channels
    assert set(rec) == {"lexical", "dense", "memory"} and rec["lexical"]["own"] > 0
    assert r.router == "fused" and "memory" in r.alternatives
    # single-channel routers and a missing channel
    assert route_on_evidence(rtree, query, None,
                             RouteBy("lexical", walk="topk", limits=WalkLimits(k=1))).selected == r.selected
    no_mem = RoutingTree.from_tree(tree, None, doc_id=1, evidence=ev)
    r2 = route_on_evidence(no_mem, query, None, TOPK_1)
    assert "memory" not in r2.channels and r2.selected == r.selected
    with pytest.raises(RouterUnavailable, match="memories"):
        route_on_evidence(no_mem, query, None, RouteBy("memory"))
