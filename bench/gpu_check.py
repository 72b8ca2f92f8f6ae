"""The product on a GPU in one run: every mode asked once, then the serving figures.

    python -m bench.gpu_check [--device cuda] [--questions 30] [--write-results]

On a fresh library (a temporary folder), on ``--device`` (default: cuda when there is one):
1. loads the backbone and the trained parts (seconds, and whether the backbone's config still
   marks its weights as packed GGUF);
2. ingests the ORD-QA documentation (../shared/bench/ordqa, no PDF reader needed): phase one,
   then phase two (the memories) in ms a node;
3. asks one ORD-QA dev question in every mode (``MODES``) and with the memory router: each
   must answer (an error is a failed row, and the run exits 1);
4. time to first token per mode, medians over ``--questions`` dev questions asked in turns, the
   routing and the H2MT question vector's share of memory mode, and memory/flat (the HMT
   baseline; H2MT reports 0.48x against its full-context mode);
5. one 128-token text answer alone, then eight at once in threads: seconds each, tokens a
   second, and the answers a minute of eight against one.
Prints one Markdown table; ``--write-results`` also appends it to docs/results.md under the
GPU's name. Targets (issue "Runs on a GPU"): 128 tokens <= 0.8 s alone, eight >= 6x the
answers a minute, memory TTFT <= 60 ms and <= 0.5x flat's, phase two <= 3 ms a node.
On a CPU it runs too, on a small manual: ``--device cpu --manual FILE --question Q --tokens 8``
(flat mode encodes the whole ORD-QA documentation with the backbone first: minutes on a CPU).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import torch

from bench.load import at_once
from engine.answer.modes import MODES
from engine.ask import AskOptions, ask
from engine.ingest import ingest_file
from engine.runtime import Runtime
from engine.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
ORDQA = ROOT.parent / "shared" / "bench" / "ordqa"


def device_name(device: str) -> str:
    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return "CPU"


def questions(n: int) -> list[str]:
    rows = [json.loads(line) for line in (ORDQA / "ordqa_dev.jsonl").read_text().splitlines()
            if line.strip()]
    return [r["question"].strip() for r in rows[:n]]


def timed_ask(rt: Runtime, doc: int, q: str, **opts) -> tuple[float, object]:
    t0 = time.perf_counter()
    ans = ask(rt, doc, q, AskOptions(**opts), log=False)
    return time.perf_counter() - t0, ans


def eight_at_once(rt: Runtime, doc: int, qs: list[str], **opts) -> float:
    """Eight asks in threads started together (``bench.load.at_once``); wall seconds. An ask's
    error fails the run."""
    errors: list[BaseException] = []

    def one(i: int, ready) -> None:
        ready()
        try:
            timed_ask(rt, doc, qs[i % len(qs)], **opts)
        except BaseException as e:  # noqa: BLE001 (raised below)
            errors.append(e)

    wall = at_once(8, one)
    if errors:
        raise errors[0]
    return wall


class Rows(list):
    """(figure, value, target) rows, each printed as it is measured (a run cut short by a time
    limit still shows what it measured)."""

    def append(self, row: tuple[str, str, str]) -> None:
        super().append(row)
        print(" | ".join(row), flush=True)


def run(args) -> tuple[list[tuple[str, str, str]], bool]:
    rows = Rows()
    ok = True
    data = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    settings = Settings(data_dir=data, device=args.device)
    t0 = time.perf_counter()
    rt = Runtime.load(settings)
    config = getattr(rt.backbone.model.config, "quantization_config", None)
    rows.append(("backbone + parts loaded", f"{time.perf_counter() - t0:.1f} s on "
                 f"{rt.backbone.device} ({rt.backbone.dtype})",
                 "plain weights" if config is None else f"still marked {config}"))
    ok &= config is None

    res = ingest_file(args.manual, rt, memories=True)
    rows.append(("ingest phase one (tree + evidence)",
                 f"{(res.tree_ms + res.evidence_ms) / 1e3:.1f} s, {res.nodes} nodes", ""))
    per_node = res.memory_ms / max(res.nodes, 1)
    rows.append(("ingest phase two (memories)", f"{res.memory_ms / 1e3:.1f} s = "
                 f"{per_node:.1f} ms a node", "<= 3 ms a node"))
    doc = res.doc_id

    qs = args.question or questions(max(args.questions, 1))
    tokens = args.tokens
    for mode in MODES:
        for router in ("fused", "memory") if mode == "memory" else ("fused",):
            label = mode if router == "fused" else f"{mode} [memory router]"
            try:
                s, ans = timed_ask(rt, doc, qs[0], mode=mode, router=router,
                                   max_new_tokens=tokens)
                rows.append((f"asks in {label} mode", f"answered in {s * 1e3:.0f} ms "
                             f"({len(ans.text)} characters)", "answers"))
            except Exception as e:  # noqa: BLE001 (the row says it; the run fails)
                ok = False
                rows.append((f"asks in {label} mode", f"FAILED: {type(e).__name__}: "
                             f"{str(e).splitlines()[0][:160]}", "answers"))
    if not ok:
        return rows, ok

    timed = ("memory", "flat", "text", "full", "route", "quote")
    ttft: dict[str, list[float]] = {m: [] for m in timed}
    route_ms, qvec_ms = [], []
    for q in qs:
        for mode in timed:
            _, ans = timed_ask(rt, doc, q, mode=mode, max_new_tokens=1)
            m = ans.metrics
            ttft[mode].append(m.ttft_ms if mode not in ("route", "quote") else m.total_ms)
            if mode == "memory":
                route_ms.append(m.route_ms)
                qvec_ms.append(m.query_vector_ms)
    med = {m: statistics.median(v) for m, v in ttft.items()}
    for mode in timed:
        what = "time to first token" if mode not in ("route", "quote") else "time to answer"
        rows.append((f"{mode}: {what}, median of {len(qs)}", f"{med[mode]:.0f} ms",
                     "<= 60 ms" if mode == "memory" else ""))
    rows.append(("memory mode: routing / question vector, medians",
                 f"{statistics.median(route_ms):.0f} / {statistics.median(qvec_ms):.0f} ms", ""))
    rows.append(("memory / flat (HMT) time to first token", f"{med['memory'] / med['flat']:.2f}x",
                 "<= 0.5x (H2MT: 0.48x)"))

    text = dict(mode="text", max_new_tokens=tokens)
    timed_ask(rt, doc, qs[0], **text)  # warm
    alone, ans = timed_ask(rt, doc, qs[0], **text)
    gen = max(ans.metrics.generated_tokens, 1)
    rows.append((f"one text answer alone (up to {tokens} tokens)",
                 f"{alone:.2f} s, {gen} tokens, {gen / alone:.0f} tokens/s", "<= 0.8 s"))
    eight = eight_at_once(rt, doc, qs, **text)
    rows.append(("eight text answers at once", f"{eight:.2f} s for all eight", ""))
    rows.append(("answers a minute, eight at once / one", f"{8 * alone / eight:.1f}x", ">= 6x"))
    return rows, ok


def table(rows, title: str) -> str:
    out = [f"#### {title}", "", "| figure | value | target |", "| --- | --- | --- |"]
    out += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--questions", type=int, default=30, help="ORD-QA dev questions timed")
    ap.add_argument("--manual", type=Path, default=ORDQA / "openroad_documentation.json")
    ap.add_argument("--question", action="append", default=[],
                    help="ask these instead of the ORD-QA dev questions (with --manual)")
    ap.add_argument("--tokens", type=int, default=128, help="new tokens of a text answer")
    ap.add_argument("--write-results", action="store_true",
                    help="append the table to docs/results.md")
    args = ap.parse_args()
    rows, ok = run(args)
    title = (f"The product on {device_name(args.device)} ({date.today().isoformat()}, "
             f"`python -m bench.gpu_check {' '.join(sys.argv[1:])}`)")
    text = table(rows, title)
    print(text)
    if args.write_results:
        with open(ROOT / "docs" / "results.md", "a") as f:
            f.write("\n" + text)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
