"""Drawing speed of the routing tree on a large manual (the 715-page ngspice manual).

    python -m bench.tree_draw [--doc FILE] [--k K] [--rounds N] [--seed S]

Builds the manual's tree (token-limit splitting with the real tokenizer, no memories written),
routes a random query over random node memories with the real router (per-parent top-k), then
times what the app does after every answer: the tidy layout, the Plotly figure and its JSON
(``fig.to_json()``, what Gradio sends to the browser). Also times the whole-manual icicle.
Prints the median over rounds; the last line is ``tree draw ms (ngspice, N nodes): X``
(the goal is under 1000 ms).
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from app.views.figures import figure_summary, route_figure
from app.views.icicle import manual_figure
from engine.memory.backbone import load_tokenizer
from engine.memory.projections import RouterProjections
from engine.routing.router import RoutingTree, route
from engine.settings import Settings
from engine.document.build import build_tree

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
D_MODEL = 576  # SmolLM2-135M's hidden size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--doc", type=Path, default=CORPUS / "ngspice-manual.pdf")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    settings = Settings()
    tok = load_tokenizer(settings)
    t0 = time.perf_counter()
    tree = build_tree(args.doc, lambda t: tok.encode(t, add_special_tokens=False),
                      lambda ids: tok.decode(ids, skip_special_tokens=True),
                      settings.node_token_limit)
    print(f"tree of {args.doc.name}: {len(tree)} nodes, depth {tree.depth}, {tree.pages} pages "
          f"({(time.perf_counter() - t0):.1f} s to build)")

    gen = torch.Generator().manual_seed(args.seed)
    memories = {i: torch.randn(D_MODEL, generator=gen) for i in tree.graph.nodes}
    routing = RoutingTree.from_tree(tree, memories, doc_id=1)
    r = route(routing, torch.randn(D_MODEL, generator=gen), RouterProjections(D_MODEL), k=args.k)
    print(f"route: k={r.k}, {len(r.selected)} selected, {r.scored} scored, stop: {r.stop_reason}")

    tree_ms, icicle_ms = [], []
    size = 0
    for _ in range(args.rounds):
        t = time.perf_counter()
        fig = route_figure(r)
        size = len(fig.to_json())
        tree_ms.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        manual_figure(r).to_json()
        icicle_ms.append((time.perf_counter() - t) * 1e3)
    s = figure_summary(fig)
    print(f"drawn: {s['nodes']}, {s['collapsed_markers']} collapsed markers standing for "
          f"{s['collapsed_nodes']} unvisited nodes; figure JSON {size / 1024:.0f} KiB")
    print(f"icicle of the whole manual ms: {statistics.median(icicle_ms):.0f}")
    print(f"tree draw ms (ngspice, {len(tree)} nodes): {statistics.median(tree_ms):.0f}")


if __name__ == "__main__":
    main()
