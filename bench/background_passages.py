"""An upload through the app's handler, then quote-mode asks while its passage vectors are
encoded in the background and the same asks after.

    OMP_NUM_THREADS=1 python -m bench.background_passages FILE "QUESTION" ["QUESTION"...]
        [--every SECONDS]

Into a fresh SQLite library in a temporary folder (the other settings from the ``H2MT_*``
variables, e.g. ``H2MT_EVIDENCE_PRECISION``), with the app's memory thread off (only the
passage worker runs beside the asks). Prints the upload's status line and seconds, the first
answer's seconds after the upload started, then each ask during the background encoding
(seconds, texts prepared at its start, whether the route had the sentence-encoder channel) and
after it (seconds; whether the quote is the same), and when every vector was stored. The asks
come back to back (a worst case for the background) or one every ``--every`` seconds.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from app.library.library_tab import alone, upload
from app.shared.memory_writer import MemoryWriter
from app.shared.state import AppState
from engine.answer.options import AskOptions
from engine.ask import ask
from engine.runtime import Runtime
from engine.settings import Settings


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("file", type=Path)
    p.add_argument("questions", nargs="+")
    p.add_argument("--every", type=float, default=0.0,
                   help="seconds from one ask's start to the next during the background work "
                        "(0: back to back)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rt = Runtime.load(Settings.from_env(data_dir=Path(tmp), cache_dir=Settings().cache_dir,
                                            app_worker=False))
        rt.encoder  # loaded before the clock starts, as in a running app
        writer = MemoryWriter(rt)
        s = AppState(rt, rt.settings, writer)
        tab = alone(s)
        t0 = time.perf_counter()
        status = upload(s, tab, [str(args.file)], progress=lambda *a, **k: None)[tab.status]
        print(f"upload returned after {time.perf_counter() - t0:.1f} s: {status}", flush=True)
        doc = rt.library.list_documents()[0].id
        during, quotes = [], {}
        i = 0
        while writer.passages.busy():
            q = args.questions[i % len(args.questions)]
            state = writer.passages.state(doc)
            t = time.perf_counter()
            a = ask(rt, doc, q, AskOptions(mode="quote"))
            during.append(time.perf_counter() - t)
            if i == 0:
                print(f"first answer {time.perf_counter() - t0:.1f} s after the upload started",
                      flush=True)
            quotes.setdefault(q, a.quote.text if a.quote else None)
            dense = "dense" in a.route.channels if a.route is not None else None
            print(f"during ({state}, dense channel {dense}): {during[-1]:.2f} s  {q}",
                  flush=True)
            i += 1
            if args.every:
                writer.passages.wait_idle(max(0.0, args.every - during[-1]))
        writer.passages.wait_idle()
        print(f"every passage vector stored {time.perf_counter() - t0:.1f} s after the upload "
              "started", flush=True)
        after, same = [], 0
        for q in args.questions:
            t = time.perf_counter()
            a = ask(rt, doc, q, AskOptions(mode="quote"))
            after.append(time.perf_counter() - t)
            same += quotes.get(q, a.quote.text if a.quote else None) == (
                a.quote.text if a.quote else None)
            print(f"after: {after[-1]:.2f} s  {q}", flush=True)
        print(f"asks during: {len(during)}, median {statistics.median(during):.2f} s; after: "
              f"median {statistics.median(after):.2f} s; same quote {same}/{len(after)}"
              if during else "no ask ran during the background encoding", flush=True)
        writer.stop()


if __name__ == "__main__":
    main()
