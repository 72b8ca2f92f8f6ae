"""The soak of ``bench.load`` without the app: the same asks, in this process, through the
engine's ``ask`` (no Gradio, no HTTP, no query log), with this process's resident memory read
after every ask. It tells memory the engine keeps from memory the app layer keeps.

    python -m bench.soak_engine [--asks 200] [--trim]

``--trim`` hands freed heap back to the system after every ask (glibc's ``malloc_trim``): if
the resident memory then stays lower and flat, what the plain run shows is memory the allocator
holds, not objects kept alive.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.load import CORPUS, MANUAL, QUESTIONS, ROOT, _rss_mb, rss_trend


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--asks", type=int, default=200)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--trim", action="store_true", help="malloc_trim(0) after every ask")
    args = ap.parse_args(argv)

    data = Path(tempfile.mkdtemp(prefix="h2mt-soak-"))
    try:
        soak(args, data)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def soak(args: argparse.Namespace, data: Path) -> None:
    env = dict(os.environ, H2MT_DATA_DIR=str(data))
    subprocess.run([sys.executable, "-m", "engine", "ingest", str(CORPUS / MANUAL), "--text-only",
                    "--quiet"], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    os.environ["H2MT_DATA_DIR"] = str(data)
    from engine.ask import AskOptions, ask
    from engine.runtime import Runtime
    from engine.settings import Settings

    rt = Runtime.load(Settings.from_env())
    doc = rt.library.list_documents()[0].id
    trim = ctypes.CDLL("libc.so.6").malloc_trim if args.trim else None
    rss, seconds = [], []
    for n in range(args.asks):
        mode = "route" if n % 2 else "text"  # as bench.load's soak
        t0 = time.perf_counter()
        ask(rt, doc, QUESTIONS[n % len(QUESTIONS)],
            AskOptions(mode=mode, max_new_tokens=args.max_new_tokens), log=False)
        seconds.append(time.perf_counter() - t0)
        if trim is not None:
            trim(0)
        rss.append(_rss_mb(os.getpid()))
        if (n + 1) % 50 == 0:
            print(f"  {n + 1}/{args.asks}: RSS {rss[-1]:.0f} MB", flush=True)
    print(f"\nengine soak{' (trimmed)' if trim else ''}: {args.asks} asks; {rss_trend(rss)}; "
          f"median ask {statistics.median(seconds):.2f} s")

if __name__ == "__main__":
    main()
