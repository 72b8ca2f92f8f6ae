"""Time to first token per answer mode on one manual, measured in one run.

    python -m bench.ttft --db URL --doc FILE_NAME [--questions FILE] [--question Q ...]
                         [--modes memory,text,full] [--limit N] [--k K] [--max-new-tokens N]

Ingests the manual first if the database lacks it. Questions come from a question file in the
format of ../shared/bench (lines whose "doc" is the manual) and/or --question. Modes run
interleaved per question so machine noise hits them alike. Prints per-question TTFT, prefill
tokens and routing time, then medians, the memory/full and memory/text TTFT ratios and the
routing time as a share of memory-mode TTFT. ``--routers fused,memory`` runs memory mode once per
router (rows ``memory[fused]``, ``memory[memory]``), so the share of routing with every channel
on and with the memory channel alone come from the same run. Mode ``text-sections`` is text mode
with the earlier packing (whole routed sections, ``AskOptions.text_packing="sections"``), so
``--modes text,text-sections`` compares the sentence packing with it in one run (the
text/text-sections ratio is printed).
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
    ap.add_argument("--routers", default="fused", help="routers for memory mode, e.g. fused,memory")
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
    routers = args.routers.split(",")
    modes = [f"memory[{r}]" if m == "memory" and len(routers) > 1 else m
             for m in args.modes.split(",") for r in (routers if m == "memory" else [routers[0]])]
    print(f"{doc.title}: {doc.pages} pages, {doc.nodes} nodes, {doc.tokens} tokens; "
          f"backbone {rt.backbone.name} on {rt.backbone.device}")
    ttft = {m: [] for m in modes}
    prefill = {m: [] for m in modes}
    route_share: dict[str, list[float]] = {m: [] for m in modes if m.startswith("memory")}
    print(f"\n{'q':>2} {'mode':15} {'TTFT ms':>9} {'prefill':>8} {'route ms':>9}")
    for i, q in enumerate(questions):
        for m in modes:
            mode, router = (m.split("[")[0], m[m.index("[") + 1:-1]) if "[" in m else (m, routers[0])
            packing = "sections" if mode == "text-sections" else "sentences"
            mode = "text" if mode == "text-sections" else mode
            a = ask(rt, doc.doc_id, q, AskOptions(mode=mode, k=args.k, router=router,
                                                  max_new_tokens=args.max_new_tokens,
                                                  text_packing=packing), log=False)
            ttft[m].append(a.metrics.ttft_ms)
            prefill[m].append(a.metrics.prefill_tokens)
            if m in route_share and a.metrics.ttft_ms:
                route_share[m].append(a.metrics.route_ms / a.metrics.ttft_ms)
            print(f"{i:2d} {m:15} {a.metrics.ttft_ms:9.0f} {a.metrics.prefill_tokens:8d} "
                  f"{a.metrics.route_ms:9.0f}")
    print(f"\n{'mode':15} {'median TTFT ms':>15} {'median prefill':>15}")
    for m in modes:
        print(f"{m:15} {statistics.median(ttft[m]):15.0f} {statistics.median(prefill[m]):15.0f}")
    med = {m: statistics.median(v) for m, v in ttft.items()}
    if "text" in med and "text-sections" in med:
        print(f"text/text-sections TTFT ratio (sentence packing / earlier packing): "
              f"{med['text'] / med['text-sections']:.3f}")
    for mem in route_share:
        for other in ("full", "text"):
            if other in med:
                print(f"{mem}/{other} TTFT ratio: {med[mem] / med[other]:.3f}")
        print(f"routing share of {mem} TTFT (median): {statistics.median(route_share[mem]):.3f}")


if __name__ == "__main__":
    main()
