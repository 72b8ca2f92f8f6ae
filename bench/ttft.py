"""Time to first token per answer mode on one manual, measured in one run.

    python -m bench.ttft --db URL --doc FILE_NAME [--questions FILE] [--question Q ...]
                         [--modes memory,text,full,route] [--limit N] [--k K] [--max-new-tokens N]
                         [--routers fused,fused/topk] [--text-only]

Ingests the manual first if the database lacks it. Questions come from a question file in the
format of ../shared/bench (lines whose "doc" is the manual) and/or --question. Modes run
interleaved per question so machine noise hits them alike. Prints per-question TTFT, prefill
tokens and routing time, then medians, the memory/full and memory/text TTFT ratios and the
routing time as a share of memory-mode TTFT. ``--routers fused,memory`` runs memory mode once per
router (rows ``memory[fused]``, ``memory[memory]``), so the share of routing with every channel
on and with the memory channel alone come from the same run. A router may name its walk
(``fused/topk``: the walk before issue 24; ``bench.routers.parse_router``), and ``--modes route``
times routing alone per router; the ``walk ms`` column is the scoring and walk without the
question's encodings (``Route.route_ms``), printed with its median and the ratio of each
router's median to the first router's. Mode ``text-sections`` is text mode
with the earlier packing (whole routed sections, ``AskOptions.text_packing="sections"``), so
``--modes text,text-sections`` compares the sentence packing with it in one run (the
text/text-sections ratio is printed). For memory mode the share of the H2MT query vector alone
(the backbone pass over the question, ``Metrics.query_vector_ms``) is printed beside routing's;
``--old-query`` also times, per question and right after it, the earlier query-vector path (the
padded batch path, ``router.query_vectors``) and prints the routing share memory mode would have
with it (its query-vector time in place of the new one's, in both route and TTFT).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from bench.routers import parse_router
from engine.ask import AskOptions, ask
from engine.ingest import ingest_file
from engine.routing.router import query_vectors
from engine.runtime import Runtime
from engine.settings import Settings

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db")
    ap.add_argument("--doc", required=True, help="file name in the corpus, or a path")
    ap.add_argument("--questions", type=Path)
    ap.add_argument("--question", action="append", default=[])
    ap.add_argument("--modes", default="memory,text,full")
    ap.add_argument("--limit", type=int, default=5)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--routers", default="fused",
                    help="routers for memory and route modes, e.g. fused,memory or fused,fused/topk")
    ap.add_argument("--text-only", action="store_true",
                    help="ingest without memories (phase one only: route and text modes)")
    ap.add_argument("--old-query", action="store_true",
                    help="also time the earlier (padded batch) query-vector path per question")
    args = ap.parse_args()

    rt = Runtime.load(Settings.from_env().with_(db_url=args.db))
    path = Path(args.doc) if Path(args.doc).is_file() else CORPUS / args.doc
    doc = ingest_file(path, rt, memories=not args.text_only)
    questions = list(args.question)
    if args.questions:
        for line in args.questions.read_text().splitlines():
            row = json.loads(line)
            if row.get("doc", path.name) == path.name:
                questions.append(row["question"])
    questions = questions[: args.limit]
    routers = args.routers.split(",")
    for r in routers:
        try:
            parse_router(r)
        except ValueError as e:
            raise SystemExit(str(e)) from None
    per_router = ("memory", "route")
    modes = [f"{m}[{r}]" if m in per_router and len(routers) > 1 else m
             for m in args.modes.split(",") for r in (routers if m in per_router else [routers[0]])]
    print(f"{doc.title}: {doc.pages} pages, {doc.nodes} nodes, {doc.tokens} tokens; "
          f"backbone {rt.backbone.name} on {rt.backbone.device}")
    ttft = {m: [] for m in modes}
    prefill = {m: [] for m in modes}
    walk_ms: dict[str, list[float]] = {m: [] for m in modes}
    route_share: dict[str, list[float]] = {m: [] for m in modes if m.startswith("memory")}
    qv_share: dict[str, list[float]] = {m: [] for m in route_share}
    old_share: dict[str, list[float]] = {m: [] for m in route_share}
    qv_ms: dict[str, list[float]] = {m: [] for m in route_share}
    old_ms: list[float] = []
    print(f"\n{'q':>2} {'mode':22} {'TTFT ms':>9} {'prefill':>8} {'route ms':>9} {'walk ms':>8}")
    for i, q in enumerate(questions):
        for m in modes:
            mode, spec = (m.split("[")[0], m[m.index("[") + 1:-1]) if "[" in m else (m, routers[0])
            router, how = parse_router(spec)
            packing = "sections" if mode == "text-sections" else "sentences"
            mode = "text" if mode == "text-sections" else mode
            a = ask(rt, doc.doc_id, q, AskOptions(mode=mode, k=args.k, router=router, walk=how,
                                                  max_new_tokens=args.max_new_tokens,
                                                  text_packing=packing), log=False)
            ttft[m].append(a.metrics.ttft_ms)
            prefill[m].append(a.metrics.prefill_tokens)
            walk = a.route.route_ms if a.route is not None else float("nan")
            walk_ms[m].append(walk)
            if m in route_share and a.metrics.ttft_ms:
                mt = a.metrics
                route_share[m].append(mt.route_ms / mt.ttft_ms)
                qv_share[m].append(mt.query_vector_ms / mt.ttft_ms)
                qv_ms[m].append(mt.query_vector_ms)
                if args.old_query and mt.query_vector_ms:
                    t = time.perf_counter()
                    query_vectors([q], rt.backbone, rt.parts, AskOptions().query_fraction)
                    old = (time.perf_counter() - t) * 1e3
                    old_ms.append(old)
                    extra = old - mt.query_vector_ms
                    old_share[m].append((mt.route_ms + extra) / (mt.ttft_ms + extra))
            print(f"{i:2d} {m:22} {a.metrics.ttft_ms:9.0f} {a.metrics.prefill_tokens:8d} "
                  f"{a.metrics.route_ms:9.0f} {walk:8.2f}")
    print(f"\n{'mode':22} {'median TTFT ms':>15} {'median prefill':>15} {'median walk ms':>15}")
    for m in modes:
        print(f"{m:22} {statistics.median(ttft[m]):15.0f} {statistics.median(prefill[m]):15.0f} "
              f"{statistics.median(walk_ms[m]):15.2f}")
    routed = [m for m in modes if m.startswith("route[")]
    for m in routed[1:]:
        print(f"{m}/{routed[0]} median walk ms ratio: "
              f"{statistics.median(walk_ms[m]) / statistics.median(walk_ms[routed[0]]):.3f}; "
              f"median route ms ratio (with the question's encodings): "
              f"{statistics.median(ttft[m]) / statistics.median(ttft[routed[0]]):.3f}")
    med = {m: statistics.median(v) for m, v in ttft.items()}
    if "text" in med and "text-sections" in med:
        print(f"text/text-sections TTFT ratio (sentence packing / earlier packing): "
              f"{med['text'] / med['text-sections']:.3f}")
    for mem in route_share:
        for other in ("full", "text"):
            if other in med:
                print(f"{mem}/{other} TTFT ratio: {med[mem] / med[other]:.3f}")
        print(f"routing share of {mem} TTFT (median): {statistics.median(route_share[mem]):.3f}")
        if qv_share[mem]:
            print(f"query-vector share of {mem} TTFT (median): "
                  f"{statistics.median(qv_share[mem]):.3f}; median query vector "
                  f"{statistics.median(qv_ms[mem]):.0f} ms")
        if old_share[mem]:
            print(f"routing share of {mem} TTFT with the earlier query path (median): "
                  f"{statistics.median(old_share[mem]):.3f}; median earlier query vector "
                  f"{statistics.median(old_ms):.0f} ms")


if __name__ == "__main__":
    main()
