"""The candidate stage for big libraries (issue 25, engine.routing.candidates): exact statistics
without scoring every node, the index, and the candidate path against the exact path on a real
manual (its storage: tests/storage/test_storage.py and tests/test_ask.py)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.memory.projections import RouterProjections
from engine.routing.candidates import CandidateIndex, Moments, top_scores
from engine.routing.fused import (RouteBy, RouteQuery, channels_on_demand, read_query,
                                  route_on_evidence, score_channels)
from engine.routing.fusion import zscore
from engine.routing.router import RoutingTree


def test_moments_give_the_exact_mean_and_deviation():
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((500, 24)).astype(np.float32) + rng.standard_normal(24)
    q = rng.standard_normal(24).astype(np.float32)
    mean, sd = Moments.of(rows, chunk=64).stats(q, scale=0.5)
    s = (rows @ q) * 0.5
    assert mean == pytest.approx(float(s.mean()), rel=1e-5)
    assert sd == pytest.approx(float(s.std()), rel=1e-4)


def test_top_scores_keeps_the_best_positive():
    s = np.array([0.0, 3.0, 1.0, 0.0, 2.0, 5.0], np.float32)
    assert sorted(top_scores(s, 2).tolist()) == [1, 5]
    assert sorted(top_scores(s, 10).tolist()) == [1, 2, 4, 5]  # zeros are no candidates


def test_index_finds_neighbours_and_survives_bytes():
    rng = np.random.default_rng(1)
    centres = rng.standard_normal((20, 32))
    x = (centres[rng.integers(0, 20, 2000)] + 0.1 * rng.standard_normal((2000, 32)))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    has = np.ones(len(x), bool)
    has[:5] = False  # rows without evidence are not indexed
    index = CandidateIndex.build(x, has, "k")
    q = x[100]
    exact = set(np.argsort(-(x[5:] @ q))[:50] + 5)
    found = index.search(q, 50)
    assert not set(found) & set(range(5))
    assert len(set(found) & exact) >= 45  # clustered data: a near-exact neighbour list
    back = CandidateIndex.from_bytes(index.to_bytes())
    assert back.key == "k" and back.moments.n == 1995
    assert np.array_equal(np.sort(back.search(q, 50)), np.sort(found))


@pytest.fixture(scope="module")
def etoolbox(corpus_tree):
    """etoolbox with its real evidence (tokens and MiniLM vectors) and random memories."""
    from engine.document.hygiene import mark_evidence_hygiene
    from engine.routing.dense import load_encoder
    from engine.routing.evidence import compute_evidence

    tree = mark_evidence_hygiene(corpus_tree("etoolbox-manual.pdf"))
    encoder = load_encoder("cpu")
    gen = torch.Generator().manual_seed(0)
    memories = {i: torch.randn(64, generator=gen) for i in range(len(tree))}
    rtree = RoutingTree.from_tree(tree, memories, doc_id=1,
                                  evidence=compute_evidence(tree, encoder))
    return rtree, encoder, RouterProjections(64)


QUESTIONS = ["How do I patch a command?", "How can I make a command robust?",
             "list processing loop over a comma separated list",
             "How do I add code at the end of the preamble?", "boolean flags toggle",
             "test if a macro is defined", "expand arguments of a hook"]


def _query(encoder, q: str) -> RouteQuery:
    from engine.routing import lexical

    return RouteQuery(tokens=lexical.tokenize(q), dense=encoder.encode_query(q),
                      memory=torch.randn(64, generator=torch.Generator().manual_seed(len(q))))


def test_candidate_scores_equal_the_exact_ones_on_a_real_manual(etoolbox):
    """Every channel's statistics over all nodes come out exact without scoring all nodes, so a
    candidate's fused score is the exact path's."""
    rtree, encoder, proj = etoolbox
    rtree.candidates = CandidateIndex.build(rtree.dense, rtree.has_evidence, "etoolbox")
    try:
        for q in QUESTIONS:
            query = _query(encoder, q)
            ev = read_query(rtree, query, proj)
            exact = score_channels(rtree, ev)
            on_demand, cands = channels_on_demand(rtree, ev)
            assert set(on_demand) == set(exact) == {"lexical", "dense", "memory"}
            assert len(cands) and rtree.has_evidence[cands].all()
            for name, ch in exact.items():
                want = zscore(ch.own)[cands]
                assert np.allclose(on_demand[name].z(cands), want, atol=1e-4), name
    finally:
        rtree.candidates = None


def test_candidate_and_exact_paths_on_a_real_manual(etoolbox):
    """The same routes with every evidence node a candidate; with few candidates, routes that
    still keep the rescued paths, and the trace and the disagreement view on both paths."""
    rtree, encoder, proj = etoolbox
    index = CandidateIndex.build(rtree.dense, rtree.has_evidence, "etoolbox")
    for q in QUESTIONS:
        query = _query(encoder, q)
        rtree.candidates = None
        exact = route_on_evidence(rtree, query, proj)
        assert exact.candidates is None
        rtree.candidates = index
        route = route_on_evidence(rtree, query, proj)
        assert route.candidates is not None
        assert route.selected == exact.selected, q
        assert route.scores == pytest.approx(exact.scores, abs=1e-4)
        assert dict(route.alternatives) == dict(exact.alternatives)
        for i in route.selected:  # the trace and the packing score of every selected node
            assert route.pack_scores[i] == pytest.approx(exact.pack_scores[i], abs=1e-4)
            got, want = route.node_channels(i), exact.node_channels(i)
            for name in want:
                for part in ("own", "subtree"):
                    if want[name][part] is None:
                        assert got[name][part] is None
                    elif name == "memory" or part == "own":
                        assert got[name][part] == pytest.approx(want[name][part], abs=1e-4)
                    else:  # the max over the scored nodes below: at most the exact one
                        assert got[name][part] <= want[name][part] + 1e-5
        # the topk walk needs every node's subtree scores: it keeps the exact path
        assert route_on_evidence(rtree, query, proj, RouteBy(walk="topk")).candidates is None
    # few candidates (8 a channel; the random memories are no candidates' source): each route
    # is still a connected walk from the root, and it overlaps the exact one
    few_index = CandidateIndex(index.ann, index.moments, index.key, count=8)
    overlap = []
    for q in QUESTIONS:
        query = _query(encoder, q)
        rtree.candidates = None
        exact = route_on_evidence(rtree, query, proj)
        rtree.candidates = few_index
        few = route_on_evidence(rtree, query, proj)
        assert few.candidates <= 16
        sel = set(few.selected)
        assert all(rtree.parent[u] == 0 or rtree.parent[u] in sel for u in few.selected)
        overlap.append(len(sel & set(exact.selected)) / len(sel | set(exact.selected)))
    rtree.candidates = None
    assert np.mean(overlap) >= 0.5, overlap


def test_the_threshold_is_a_checked_setting():
    from engine.settings import Settings, SettingsError

    assert Settings().candidates_min_nodes == 10_000
    assert Settings.from_env({"H2MT_CANDIDATES_MIN_NODES": "0"}).candidates_min_nodes == 0
    with pytest.raises(SettingsError, match="H2MT_CANDIDATES_MIN_NODES must be 0"):
        Settings.from_env({"H2MT_CANDIDATES_MIN_NODES": "-1"})
    with pytest.raises(SettingsError, match="is not a number"):
        Settings.from_env({"H2MT_CANDIDATES_MIN_NODES": "many"})
