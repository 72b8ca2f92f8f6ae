"""Time to first token per answer mode on one manual, measured in one run.

    python -m bench.ttft --db URL --doc FILE_NAME [--questions FILE] [--question Q ...]
                         [--modes memory,text,full] [--limit N] [--k K] [--max-new-tokens N]

Ingests the manual first if the database lacks it. Questions come from a question file in the
format of ../shared/bench (lines whose "doc" is the manual) and/or --question. Modes run
interleaved per question so machine noise hits them alike. Prints per-question TTFT, prefill
tokens and routing time, then medians, the memory/full and memory/text TTFT ratios and the
routing time as a share of memory-mode TTFT.
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from engine.ask import AskOptions, ask
from engine.ingest import ingest_file
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
    args = ap.parse_args()

    rt = Runtime.load(Settings.from_env().with_(db_url=args.db))
    path = Path(args.doc) if Path(args.doc).is_file() else CORPUS / args.doc
    doc = ingest_file(path, rt)
    questions = list(args.question)
    if args.questions:
        for line in args.questions.read_text().splitlines():
            row = json.loads(line)
            if row.get("doc", path.name) == path.name:
                questions.append(row["question"])
    questions = questions[: args.limit]
    modes = args.modes.split(",")
    print(f"{doc.title}: {doc.pages} pages, {doc.nodes} nodes, {doc.tokens} tokens; "
          f"backbone {rt.backbone.name} on {rt.backbone.device}")
    ttft = {m: [] for m in modes}
    prefill = {m: [] for m in modes}
    route_share = []
    print(f"\n{'q':>2} {'mode':7} {'TTFT ms':>9} {'prefill':>8} {'route ms':>9}")
    for i, q in enumerate(questions):
        for m in modes:
            a = ask(rt, doc.doc_id, q, AskOptions(mode=m, k=args.k, max_new_tokens=args.max_new_tokens),
                    log=False)
            ttft[m].append(a.metrics.ttft_ms)
            prefill[m].append(a.metrics.prefill_tokens)
            if m == "memory" and a.metrics.ttft_ms:
                route_share.append(a.metrics.route_ms / a.metrics.ttft_ms)
            print(f"{i:2d} {m:7} {a.metrics.ttft_ms:9.0f} {a.metrics.prefill_tokens:8d} "
                  f"{a.metrics.route_ms:9.0f}")
    print(f"\n{'mode':7} {'median TTFT ms':>15} {'median prefill':>15}")
    for m in modes:
        print(f"{m:7} {statistics.median(ttft[m]):15.0f} {statistics.median(prefill[m]):15.0f}")
    med = {m: statistics.median(v) for m, v in ttft.items()}
    if "memory" in med:
        for other in ("full", "text"):
            if other in med:
                print(f"memory/{other} TTFT ratio: {med['memory'] / med[other]:.3f}")
        print(f"routing share of memory TTFT (median): {statistics.median(route_share):.2f}")


if __name__ == "__main__":
    main()
