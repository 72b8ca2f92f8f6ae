"""Time from question to quote, with and without the passage ranker, in one run (issue 42).

    python -m bench.quote_time --db URL --doc ID [--rounds 2] [--out FILE]

Asks ``QUESTIONS`` (written for timing only: generic questions a user of a circuit simulator
would ask, none from an evaluation set) in quote mode on document ``ID``, alternating the
linear score over the routed sections (``H2MT_PASSAGE_RANKER=none``: the quote as it was before
issue 42) and the shipped passage ranker, question by question, so that both see the same
machine load. Reports the median of the answer's total time (question to quote: routing and the
quote; quote mode generates nothing) and of its ``quote_ms`` for each, and the first ask's time
with the ranker (it builds the manual's passage index: ``engine.answer.passages.passage_index``).
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from bench.metrics import median

QUESTIONS = (
    "How do I run a transient analysis?",
    "Which option sets the relative tolerance?",
    "What is the default temperature of a simulation?",
    "How do I plot a node voltage?",
    "How do I define a subcircuit?",
    "What does the .include statement do?",
    "How do I set the initial conditions of a capacitor?",
    "Which command saves the simulation results to a file?",
    "How do I model a diode?",
    "What is the syntax of a voltage source?",
)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.quote_time")
    ap.add_argument("--db", required=True)
    ap.add_argument("--doc", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    from engine.answer.options import AskOptions
    from engine.ask import ask
    from engine.runtime import Runtime
    from engine.settings import Settings

    rt = Runtime.load(Settings.from_env(db_url=a.db))
    variants = {"before (linear, routed sections)": replace(rt.settings, passage_ranker="none"),
                "after (passage ranker)": rt.settings}
    times = {k: {"total_ms": [], "quote_ms": []} for k in variants}
    first = None
    for _ in range(a.rounds):
        for q in QUESTIONS:
            for name, s in variants.items():
                rt.settings = s
                t = time.perf_counter()
                ans = ask(rt, a.doc, q, AskOptions(mode="quote"), log=False)
                total = (time.perf_counter() - t) * 1e3
                if first is None and s.passage_ranker != "none":
                    first = total
                times[name]["total_ms"].append(total)
                times[name]["quote_ms"].append(ans.metrics.quote_ms)
    report = {k: {m: round(median(v[m]), 1) for m in v} for k, v in times.items()}
    report["first ask with the ranker (builds the passage index), ms"] = round(first or 0, 1)
    report["questions"] = len(QUESTIONS) * a.rounds
    print(json.dumps(report, indent=1))
    if a.out:
        a.out.write_text(json.dumps({"report": report, "times": times}, indent=1))


if __name__ == "__main__":
    main()
