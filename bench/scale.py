"""Routing cost against tree size on synthetic trees (H2MT appendix C).

    python -m bench.scale [--sizes 100,1000,10000,100000] [--k 3] [--d 576] [--repeats 20]
                          [--max-depth 6] [--mean-branching 5] [--seed 0]

Each tree is grown breadth-first to the target size: every node below the depth cap gets a
number of children drawn from a geometric distribution with the given mean (like the corpus
manuals' outlines: many small fan-outs, a few large ones), until the node count is reached.
Memories are random Gaussian vectors (d = 576, the backbone's width), the router is
``engine.routing.router.route`` with its untrained projections, per-parent top-k and no node budget.
Queries are random too. Reported per size: nodes, tree depth, scored nodes (children scored on
the way down: the explored part), selected nodes, median route ms over the repeats, and
microseconds per scored node, for ``engine.routing.router.route`` as a whole and for its core (scoring the
explored children against precomputed keys and keeping the per-parent top-k; see ``core_route``).
Routing cost should follow the scored nodes, not the tree size.

``--fused`` adds the router on evidence (``engine.routing.fused.route_on_evidence``: lexical,
dense and memory channels over every node, max-propagated, z-scored and fused, then the walk).
``--library`` makes each size a library of 1k-node synthetic manuals under a virtual root (how
``RoutingTree.from_library`` routes a whole library) instead of one tree of that size: a big
library is many manuals, and the per-parent walk explores a few of them, where one 100k-node
tree of fan-out 5 and depth 6 makes it explore thousands of nodes.
Synthetic evidence: each node gets 40 tokens drawn from a Zipf distribution over a 50k-word
vocabulary and a random unit 384-d vector; each query 5 Zipf tokens, a unit vector and a memory
query. Reported: the fused route's median ms (channels given the query's vectors: the cost
that grows with the library), and the same plus a real MiniLM query encoding and a lexical
tokenisation, as a user waits for them (``--encoder``; the backbone's query vector for the
memory channel is another fixed cost, measured by bench.ttft).
At and above ``--candidates-min-nodes`` (the engine's setting ``H2MT_CANDIDATES_MIN_NODES``
by default) the tree gets the candidate stage's index (``engine.routing.candidates``: built once
per library, its time printed) and the fused route is the candidate path; the exact path is
timed on the same tree and queries too (``exact``), so one run gives both. The fused routes
are timed interleaved: each repeat routes one query at every size through every path.
The last lines are ``routing time 100k/1k nodes: X`` (ratio of median routing ms) and, with
--fused, ``fused routing time 100k/1k nodes: X`` (each size by the path the engine takes at
that size) and ``exact fused routing time 100k/1k nodes: X`` (every size by the exact path).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from engine.memory.projections import RouterProjections
from engine.routing.candidates import VERSION as CANDIDATES_VERSION, CandidateIndex
from engine.routing.fused import RouteBy, RouteQuery, route_on_evidence
from engine.routing.router import RoutingTree, WalkLimits, route
from engine.settings import Settings

VOCAB = 50_000
DENSE_DIM = 384
DENSE_NOISE = 1.0  # a child's vector: parent + this much noise (cosine to the parent ~0.7)


def synthetic_evidence(tree: RoutingTree, rng: np.random.Generator) -> None:
    """Zipf-distributed tokens and unit vectors for every node but the root. A node's vector is
    its parent's plus Gaussian noise of the same norm (``DENSE_NOISE``), normalised: sections
    mean something close to their chapter, as a manual's sentence-encoder vectors do (vectors
    drawn independently and uniformly on the sphere have no neighbourhoods at all, which no
    text has and which is the worst case of any nearest-neighbour index)."""
    n = len(tree)
    words = rng.zipf(1.3, size=(n, 40)) % VOCAB
    tree.tokens = [[] if i == 0 else [f"w{w}" for w in row] for i, row in enumerate(words)]
    noise = rng.standard_normal((n, DENSE_DIM)).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    dense = np.zeros((n, DENSE_DIM), dtype=np.float32)
    for i in range(1, n):  # parents come before their children (breadth-first ids)
        v = dense[tree.parent[i]] + DENSE_NOISE * noise[i]
        dense[i] = v / np.linalg.norm(v)
    tree.dense = dense


def random_query(rng: np.random.Generator, d: int, tree: RoutingTree | None = None) -> RouteQuery:
    """Zipf tokens, a memory query, and a unit vector: near a random node's when the tree has
    vectors (a question is about something in the library), else uniform."""
    v = rng.standard_normal(DENSE_DIM).astype(np.float32)
    v /= np.linalg.norm(v)
    if tree is not None and tree.dense is not None:
        v = tree.dense[int(rng.integers(1, len(tree)))] + DENSE_NOISE * v
    return RouteQuery(tokens=[f"w{w % VOCAB}" for w in rng.zipf(1.3, size=5)],
                      dense=v / np.linalg.norm(v), memory=torch.randn(d))


def synthetic_tree(n: int, rng: np.random.Generator, max_depth: int, mean_branching: float,
                   d: int) -> RoutingTree:
    """A random tree of exactly n nodes (root 0), breadth-first, geometric fan-out."""
    parent: list[int | None] = [None]
    depth = [0]
    children: list[list[int]] = [[]]
    frontier = [0]
    p = 1.0 / mean_branching
    while len(parent) < n:
        if not frontier:  # depth cap reached before n nodes: reopen the shallowest leaves
            frontier = [i for i in range(len(parent)) if not children[i] and depth[i] < max_depth]
            if not frontier:
                frontier = [i for i in range(len(parent)) if depth[i] < max_depth]
        nxt = []
        for u in frontier:
            if len(parent) >= n:
                break
            c = int(rng.geometric(p)) if u else max(2, int(rng.geometric(p)))
            c = min(c, n - len(parent))
            for _ in range(c):
                v = len(parent)
                parent.append(u)
                depth.append(depth[u] + 1)
                children.append([])
                children[u].append(v)
                if depth[v] < max_depth:
                    nxt.append(v)
        frontier = nxt
    mem = torch.from_numpy(rng.standard_normal((n, d)).astype(np.float32))
    return RoutingTree(parent=parent, children=children, depth=depth, title=[""] * n,
                       pages=[(None, None)] * n, origin=[(None, i) for i in range(n)], memories=mem)


def synthetic_library(n: int, rng: np.random.Generator, max_depth: int, mean_branching: float,
                      d: int, manual_nodes: int) -> RoutingTree:
    """A library of n nodes: synthetic manuals of ``manual_nodes`` nodes each (``synthetic_tree``)
    under a virtual root, as ``RoutingTree.from_library`` joins stored manuals; one manual
    alone when n <= manual_nodes."""
    if n <= manual_nodes:
        return synthetic_tree(n, rng, max_depth, mean_branching, d)
    parent: list[int | None] = [None]
    depth, children = [0], [[]]
    mems = [torch.zeros(1, d)]
    for _ in range(max(1, round((n - 1) / manual_nodes))):
        t = synthetic_tree(manual_nodes, rng, max_depth, mean_branching, d)
        off = len(parent)
        children[0].append(off)
        parent.extend(0 if p is None else p + off for p in t.parent)
        depth.extend(x + 1 for x in t.depth)
        children.extend([c + off for c in ch] for ch in t.children)
        mems.append(t.memories)
    m = len(parent)
    return RoutingTree(parent=parent, children=children, depth=depth, title=[""] * m,
                       pages=[(None, None)] * m,
                       origin=[(None, -1)] + [(1, i) for i in range(1, m)],
                       memories=torch.cat(mems))


@torch.no_grad()
def core_route(tree: RoutingTree, keys: torch.Tensor, qk: torch.Tensor, k: int) -> int:
    """The appendix-C part of routing alone: per level, score the frontier's children against
    precomputed keys (W_k of the centred memories, an offline cost) and keep the per-parent
    top-k. No per-node trace records. Returns the number of scored children."""
    frontier, scored = [0], 0
    while frontier:
        parents = [p for p in frontier if tree.children[p]]
        if not parents:
            break
        kids = [c for p in parents for c in tree.children[p]]
        s = (keys[kids] @ qk).tolist()
        scored += len(kids)
        nxt, j = [], 0
        for p in parents:
            ch = tree.children[p]
            sc = s[j: j + len(ch)]
            j += len(ch)
            nxt.extend(ch[i] for i in sorted(range(len(ch)), key=lambda i: -sc[i])[:k])
        frontier = nxt
    return scored


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100,1000,10000,100000")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--d", type=int, default=576)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--max-depth", type=int, default=6)
    ap.add_argument("--mean-branching", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fused", action="store_true", help="also time the router on evidence")
    ap.add_argument("--encoder", action="store_true",
                    help="with --fused: add a real MiniLM query encoding to each fused route")
    ap.add_argument("--candidates-min-nodes", type=int, default=None,
                    help="with --fused: the candidate stage from this many nodes (default: the "
                         "engine's setting, H2MT_CANDIDATES_MIN_NODES)")
    ap.add_argument("--library", action="store_true",
                    help="a size above --manual-nodes is a library of synthetic manuals of that "
                         "size under a virtual root (the 1k size is then one such manual)")
    ap.add_argument("--manual-nodes", type=int, default=1000)
    args = ap.parse_args(argv)
    if args.candidates_min_nodes is None:
        args.candidates_min_nodes = Settings.from_env().candidates_min_nodes

    torch.set_num_threads(1)  # a fair, quiet measurement on a shared machine
    threadpool_limits(1)  # numpy's BLAS too (a busy machine's spinning threads skew it)
    rng = np.random.default_rng(args.seed)
    proj = RouterProjections(args.d)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"synthetic trees: geometric fan-out mean {args.mean_branching}, depth <= {args.max_depth}, "
          f"d={args.d}, k={args.k}, {args.repeats} random queries each, 1 thread")
    print(f"{'nodes':>8} {'depth':>5} {'scored':>7} {'selected':>8} {'route ms':>9} {'us/scored':>9} "
          f"{'core ms':>8} {'core us/scored':>14}")
    med: dict[int, float] = {}
    core_med: dict[int, float] = {}
    fused_med: dict[int, float] = {}
    e2e_med: dict[int, float] = {}
    exact_med: dict[int, float] = {}
    prepared: dict[int, tuple] = {}
    encoder = None
    if args.fused and args.encoder:
        from engine.routing import lexical
        from engine.routing.dense import load_encoder

        encoder = load_encoder("cpu")
    for n in sizes:
        tree = (synthetic_library(n, rng, args.max_depth, args.mean_branching, args.d,
                                  args.manual_nodes) if args.library else
                synthetic_tree(n, rng, args.max_depth, args.mean_branching, args.d))
        route(tree, torch.randn(args.d), proj, k=args.k)  # warm-up
        times, scored, selected = [], [], []
        for _ in range(args.repeats):
            r = route(tree, torch.randn(args.d), proj, k=args.k)
            times.append(r.route_ms)
            scored.append(r.scored)
            selected.append(len(r.selected))
        med[n] = statistics.median(times)
        sc = statistics.median(scored)
        with torch.no_grad():
            mu = tree.memories[1:].mean(0)
            cm = tree.memories - mu
            keys = proj.w_k(cm / cm.norm(dim=-1, keepdim=True))  # offline, like the memories
        core = []
        for _ in range(args.repeats):
            q = torch.randn(args.d)
            t0 = time.perf_counter()
            with torch.no_grad():
                qc = q - mu
                qk = proj.w_q(qc / qc.norm()) / (proj.d_head ** 0.5)
            core_route(tree, keys, qk, args.k)
            core.append((time.perf_counter() - t0) * 1e3)
        core_med[n] = statistics.median(core)
        print(f"{n:>8} {max(tree.depth):>5} {sc:>7.0f} {statistics.median(selected):>8.0f} "
              f"{med[n]:>9.2f} {1e3 * med[n] / max(sc, 1):>9.1f} {core_med[n]:>8.2f} "
              f"{1e3 * core_med[n] / max(sc, 1):>14.1f}", flush=True)
        if args.fused:
            synthetic_evidence(tree, rng)
            t_build = time.perf_counter()
            tree.lexical_index(), tree.levels, tree.memory_keys(proj)  # once per library
            tree.child_index, tree.parent_index
            build_ms = (time.perf_counter() - t_build) * 1e3
            paths: dict[str, CandidateIndex | None] = {"exact": None}
            cand_ms = None
            if n >= args.candidates_min_nodes:
                t_build = time.perf_counter()
                paths["candidates"] = CandidateIndex.build(tree.dense, tree.has_evidence,
                                                           f"synthetic|{CANDIDATES_VERSION}")
                tree.memory_key_moments(proj)
                cand_ms = (time.perf_counter() - t_build) * 1e3
            queries = [random_query(rng, args.d, tree) for _ in range(args.repeats + 1)]
            prepared[n] = (tree, paths, queries, build_ms, cand_ms)
    if prepared:
        # Interleaved: every repeat routes one query at every size through every path, so a
        # busy machine's load drifts over all of them alike and the ratios stay fair.
        times = {(n, p): [] for n, (_, paths, *_) in prepared.items() for p in paths}
        by = RouteBy(limits=WalkLimits(k=args.k))
        e2e: dict[int, list[float]] = {n: [] for n in prepared}
        n_cand: dict[int, list[int]] = {n: [] for n in prepared}
        for i in range(args.repeats + 1):  # the first round warms up
            for n, (tree, paths, queries, _, _) in prepared.items():
                for path, ix in paths.items():  # the same query through both paths
                    tree.candidates = ix
                    t0 = time.perf_counter()
                    r = route_on_evidence(tree, queries[i], proj, by)
                    if i:
                        times[(n, path)].append((time.perf_counter() - t0) * 1e3)
                        if ix is not None:
                            n_cand[n].append(r.candidates)
                if encoder is not None:  # the engine's path at this size, as a user waits
                    text = f"how do I configure option {i} of the solver?"
                    qe = RouteQuery(memory=queries[i].memory)
                    t0 = time.perf_counter()
                    qe.tokens = lexical.tokenize(text)
                    qe.dense = encoder.encode_query(text)
                    route_on_evidence(tree, qe, proj, by)
                    if i:
                        e2e[n].append((time.perf_counter() - t0) * 1e3)
        for n, (tree, paths, _, build_ms, cand_ms) in prepared.items():
            exact_med[n] = statistics.median(times[(n, "exact")])
            fused_med[n] = statistics.median(times[(n, list(paths)[-1])])
            line = (f"{n:>8} fused: {fused_med[n]:.2f} ms per route (index build once: "
                    f"{build_ms:.0f} ms)")
            if cand_ms is not None:
                line = (f"{n:>8} fused on candidates: {fused_med[n]:.2f} ms per route, "
                        f"{statistics.median(n_cand[n]):.0f} candidates (candidate index built "
                        f"once: {cand_ms / 1e3:.1f} s); exact: {exact_med[n]:.2f} ms")
            if e2e[n]:
                e2e_med[n] = statistics.median(e2e[n])
                line += f"; with query encoding {e2e_med[n]:.2f} ms"
            print(line, flush=True)
    lo = 1000 if 1000 in med else min(med)
    hi = 100000 if 100000 in med else max(med)
    print(f"core scoring time {hi // 1000}k/{lo // 1000}k nodes: {core_med[hi] / core_med[lo]:.2f}")
    print(f"routing time {hi // 1000}k/{lo // 1000}k nodes: {med[hi] / med[lo]:.2f}")
    if fused_med:
        if e2e_med:
            print(f"fused routing with query encoding {hi // 1000}k/{lo // 1000}k nodes: "
                  f"{e2e_med[hi] / e2e_med[lo]:.2f}")
        print(f"exact fused routing time {hi // 1000}k/{lo // 1000}k nodes: "
              f"{exact_med[hi] / exact_med[lo]:.2f}")
        print(f"fused routing time {hi // 1000}k/{lo // 1000}k nodes: "
              f"{fused_med[hi] / fused_med[lo]:.2f}")


if __name__ == "__main__":
    main()
