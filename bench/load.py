"""Load and soak of the app through its HTTP API, the way scripts would use it (gradio_client).

    python -m bench.load [--clients 8] [--requests 25] [--soak 300] [--port 7870]
    python -m bench.load --clients 0 --soak 0 --together 8 [--answers 4] [--answer-tokens 128]

1. Prepares a fresh data folder and stores one manual in it (both ingest phases, by the CLI),
   then starts the app (``app.py``) as its own process on that folder.
2. Load: ``--clients`` fresh clients connect at once, each sends ``--requests`` requests in a
   fixed mix: asks in every answer mode (text, memory, route, full, flat) about the manual that
   was stored before they connected, an upload of a small Markdown manual of its own, and reads
   (/library, /outline, /node). Every request's latency and any error are recorded; the report
   gives p50 / p95 / max per kind and the error count (the goal is zero errors).
3. Soak: ``--soak`` asks in one client, one after another (route and short text answers in
   turn), with the app process's resident memory (VmRSS) read after every ask. Reported: RSS
   after the warm-up (the first tenth), at the end, and the least-squares slope over the asks
   after the warm-up in MB per 100 asks (flat is the goal).

Replicas (``--replicas N --db URL``, N >= 2, one PostgreSQL database): N app processes on the
one library, writing no memories themselves (``H2MT_APP_WORKER=0``), and one memory worker
(``python -m engine worker``). Manual r of ``REPLICA_MANUALS`` is uploaded through replica r;
once the worker has written their memories, client i talks to replica i mod N and asks only
about the manual uploaded through the next replica, so every answer is about a manual another
process stored. The soak (if any) asks replica 0 about replica 1's manual.

4. Together (``--together N``): text-mode answers of up to ``--answer-tokens`` (128) tokens,
   first one client alone asking ``--answers`` questions one after another, then N clients
   asking ``--answers`` each at once (after one warm-up ask). Reported: the median wait of an
   answer alone and together, their ratio, and the answers per minute of each phase (answers
   over the phase's wall time). The goal of issue 35: ratio at most 3 with 8 clients, zero
   errors, and 8 clients' throughput at least 3 times one client's. ``--engine-baseline``
   then times the lone client's answers with the engine alone (``engine.ask.ask`` in the bench's
   process, the app idle): issue 44's goal is the API's median wait at most 1.3 times it.

Answers are capped at ``--max-new-tokens`` (16) so that the load and the soak measure the app,
not decoding (the together phase uses ``--answer-tokens``).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
MANUAL = "camlidl-manual_no-outline.pdf"
QUESTIONS = [
    "How are arrays passed between C and OCaml?",
    "What does the camlidl compiler generate from an IDL file?",
    "How do I declare a pointer that may be null?",
    "Which attribute gives the length of an array?",
    "How are C structs mapped to OCaml records?",
]
MODES = ("text", "memory", "route", "full", "flat")
REPLICA_MANUALS = (MANUAL, "etoolbox-manual.pdf")  # uploaded through replica 0, 1, 0, ...


@dataclass
class Outcome:
    kind: str
    seconds: float
    error: str | None = None


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, o: Outcome) -> None:
        with self.lock:
            self.outcomes.append(o)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def rss_trend(rss: list[float]) -> str:
    """A soak's resident memory in words: after the warm-up (the first tenth of the asks), at
    the end, the highest, and the least-squares slope after the warm-up per 100 asks."""
    warm = max(1, len(rss) // 10)
    y = np.array(rss[warm:])
    slope = np.polyfit(np.arange(len(y)), y, 1)[0] * 100 if len(y) > 1 else 0.0
    return (f"RSS after warm-up ({warm} asks) {rss[warm - 1]:.0f} MB, at the end {rss[-1]:.0f} "
            f"MB, max {max(rss):.0f} MB; slope after warm-up {slope:+.2f} MB per 100 asks")


def _wait_up(url: str, proc: subprocess.Popen, timeout: float = 600) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"the app exited with {proc.returncode} before serving")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(1)
    raise SystemExit(f"the app did not serve {url} within {timeout:.0f} s")


def small_manual(folder: Path, i: int) -> Path:
    """A short Markdown manual of its own for client ``i`` (distinct bytes: no duplicate)."""
    p = folder / f"client{i}-guide.md"
    p.write_text(f"# Valve controller guide {i}\n\n## Installing\n\nMount controller {i} on the "
                 "rail, connect the 24 V supply and the bus cable, then switch it on.\n\n"
                 "## Calibrating\n\nHold the SET key for five seconds; the display shows CAL. "
                 "Open the valve fully, press SET, close it fully, press SET again.\n\n"
                 "## Error codes\n\nE1 means the supply is below 20 V. E2 means the bus cable "
                 "is not connected. E3 means the calibration was interrupted.\n")
    return p


def ask_args(doc: str, question: str, mode: str, max_new: int) -> tuple:
    # /ask: doc, question, mode, k, max_depth (0: none), budget (0: none), gate, hier_pos,
    # max_new_tokens, router
    return (doc, question, mode, 3, 0, 0, True, False, max_new, "fused")


def timed(report: Report, kind: str, fn, *args, **kw):
    t0 = time.perf_counter()
    try:
        out = fn(*args, **kw)
    except Exception as e:  # the bench records every failure instead of stopping
        report.add(Outcome(kind, time.perf_counter() - t0, f"{type(e).__name__}: {e}"[:300]))
        return None
    report.add(Outcome(kind, time.perf_counter() - t0))
    return out


def client_run(url: str, i: int, doc: str, node_doc: int, requests: int, max_new: int,
               folder: Path, report: Report, start: threading.Barrier) -> None:
    from gradio_client import Client, handle_file

    client = Client(url, verbose=False)
    start.wait()
    for r in range(requests):
        step = (i + r) % 10
        if step < 5:
            mode = MODES[(i + r) % len(MODES)]
            q = QUESTIONS[(i * 7 + r) % len(QUESTIONS)]
            timed(report, f"ask {mode}", client.predict, *ask_args(doc, q, mode, max_new),
                  api_name="/ask")
        elif step == 5 and r < 10:
            timed(report, "upload", client.predict, [handle_file(str(small_manual(folder, i)))],
                  api_name="/ingest")
        elif step in (5, 6, 7):
            timed(report, "library", client.predict, api_name="/library")
        elif step == 8:
            timed(report, "outline", client.predict, doc, api_name="/outline")
        else:
            timed(report, "node", client.predict, node_doc, 1, api_name="/node")


def summarise(report: Report) -> list[str]:
    lines = ["| request | n | errors | p50 s | p95 s | max s |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    kinds = sorted({o.kind for o in report.outcomes})
    for kind in kinds + ["all"]:
        rows = [o for o in report.outcomes if kind == "all" or o.kind == kind]
        t = np.array([o.seconds for o in rows])
        lines.append(f"| {kind} | {len(rows)} | {sum(o.error is not None for o in rows)} | "
                     f"{np.percentile(t, 50):.2f} | {np.percentile(t, 95):.2f} | {t.max():.2f} |")
    return lines


def run_load(args, targets: list[tuple[str, str, int]], data: Path, report: Report) -> None:
    """The load phase: ``args.clients`` fresh clients at once, ``args.requests`` each; client i
    talks to ``targets[i % len(targets)]`` = (app URL, manual asked about, manual of /node)."""
    barrier = threading.Barrier(args.clients)
    threads = []
    for i in range(args.clients):
        url, doc, node_doc = targets[i % len(targets)]
        threads.append(threading.Thread(target=client_run, args=(
            url, i, doc, node_doc, args.requests, args.max_new_tokens, data, report, barrier)))
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    errors = [o for o in report.outcomes if o.error]
    print(f"\nload: {args.clients} clients x {args.requests} requests in {wall:.0f} s, "
          f"{len(errors)} errors", flush=True)
    print("\n".join(summarise(report)))
    for o in errors[:10]:
        print(f"  error in {o.kind}: {o.error}")


def start_replicas(args, env: dict, data: Path,
                   procs: list[subprocess.Popen]) -> tuple[list[str], list[str]]:
    """``args.replicas`` apps and one memory worker on ``args.db`` (appended to ``procs``,
    apps first); manual r of ``REPLICA_MANUALS`` uploaded through replica r, its memories
    written by the worker. The apps' URLs and the manuals' ids."""
    from gradio_client import Client, handle_file

    env = dict(env, H2MT_DB_URL=args.db, H2MT_APP_WORKER="0")
    urls = []
    for r in range(args.replicas):
        port = _free_port()
        urls.append(f"http://127.0.0.1:{port}/")
        procs.append(subprocess.Popen([sys.executable, "app.py", "--port", str(port)],
                                      cwd=ROOT, env=env, stdout=open(data / f"app{r}.log", "w"),
                                      stderr=subprocess.STDOUT))
    procs.append(subprocess.Popen([sys.executable, "-m", "engine", "worker"], cwd=ROOT, env=env,
                                  stdout=open(data / "worker.log", "w"), stderr=subprocess.STDOUT))
    for url, proc in zip(urls, procs):
        _wait_up(url, proc)
        print(f"replica up at {url} (pid {proc.pid})", flush=True)
    t0 = time.perf_counter()
    docs = []
    for r, url in enumerate(urls):
        name = REPLICA_MANUALS[r % len(REPLICA_MANUALS)]
        table = Client(url, verbose=False).predict([handle_file(str(CORPUS / name))],
                                                   api_name="/ingest")[1]
        docs.append(next(str(row[0]) for row in table["data"] if row[2] == name))
        print(f"{name} uploaded through replica {r} as #{docs[-1]}", flush=True)
    client = Client(urls[-1], verbose=False)
    while True:  # the worker writes the memories (memory and flat modes need them)
        rows = [row for row in client.predict(api_name="/library")[0]["data"]
                if str(row[0]) in docs]
        if rows and all("ready" in map(str, row) for row in rows):
            break
        if procs[-1].poll() is not None:
            raise SystemExit(f"the memory worker exited with {procs[-1].returncode}")
        time.sleep(5)
    print(f"memories of {len(docs)} manuals written by the worker in "
          f"{time.perf_counter() - t0:.0f} s (uploads included)", flush=True)
    return urls, docs


# An answer's stages as the Ask tab's metrics name them (app.views.answer_view.METRIC_LABELS),
# in the order an ask passes them, and the bench's short names for them.
STAGES = (("cpu wait", "waiting for a free core"), ("route", "routing"),
          ("passages", "finding the quote"), ("queue", "waiting for the reader"),
          ("prefill", "reading the prompt (prefill)"), ("decode", "writing the answer"),
          ("check", "checking the answer"))


def stage_times(metrics_md: str) -> dict[str, float]:
    """{stage: ms} from an answer's metrics table ("| label | 12 ms |"); a stage the table
    leaves out (not reached, or no wait) is 0."""
    rows = dict(re.findall(r"^\|\s*([^|]+?)\s*\|\s*([\d.]+) ms\s*\|$", metrics_md or "", re.M))
    return {short: float(rows.get(label, 0.0)) for short, label in STAGES}


def stage_line(stages: list[dict[str, float]]) -> str:
    """The median of each stage over the answers, in words."""
    if not stages:
        return "no answer's stages"
    return ", ".join(f"{s} {statistics.median(x[s] for x in stages):.0f} ms" for s, _ in STAGES)


def answer_phase(url: str, doc: str, clients: int, answers: int, tokens: int,
                 report: Report, http: dict, stages: list | None = None) -> float:
    """``clients`` clients at once, each asking ``answers`` text-mode questions one after
    another; returns the phase's wall time (s). ``stages``: each answer's stage times are
    appended to it (``stage_times``)."""
    from gradio_client import Client

    def one(i: int, ready) -> None:
        client = Client(url, verbose=False, httpx_kwargs=http)
        ready()
        for r in range(answers):
            q = QUESTIONS[(i + r) % len(QUESTIONS)]
            out = timed(report, "answer", client.predict, *ask_args(doc, q, "text", tokens),
                        api_name="/ask")
            if out is not None and stages is not None:
                stages.append(stage_times(out[1]))  # /ask's second output: the metrics

    return at_once(clients, one)


def at_once(clients: int, one) -> float:
    """Run ``one(i, ready)`` in ``clients`` threads that start together once each has called
    ``ready()``; the wall seconds from that start until the last ends."""
    start = threading.Barrier(clients + 1)
    threads = [threading.Thread(target=one, args=(i, start.wait)) for i in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def run_together(args, url: str, doc: str, env: dict) -> None:
    """One client alone, then ``args.together`` clients at once (module docstring, step 4)."""
    from gradio_client import Client

    # gradio_client's own HTTP calls (the queue join) time out after 5 s unless told otherwise
    http = {"timeout": args.http_timeout} if args.http_timeout else {}
    Client(url, verbose=False, httpx_kwargs=http).predict(
        *ask_args(doc, QUESTIONS[0], "text", args.answer_tokens), api_name="/ask")  # warm-up
    phases = []
    for clients in (1, args.together):
        report, stages = Report(), []
        wall = answer_phase(url, doc, clients, args.answers, args.answer_tokens, report, http,
                            stages)
        t = [o.seconds for o in report.outcomes]
        errors = sum(o.error is not None for o in report.outcomes)
        phases.append((clients, statistics.median(t), len(t) / wall * 60, errors))
        print(f"together: {clients} client(s) x {args.answers} text answers of up to "
              f"{args.answer_tokens} tokens in {wall:.1f} s: median wait "
              f"{statistics.median(t):.2f} s, max {max(t):.2f} s, "
              f"{len(t) / wall * 60:.1f} answers per minute, {errors} errors", flush=True)
        print(f"together: {clients} client(s), median per stage: {stage_line(stages)}",
              flush=True)
        for o in [o for o in report.outcomes if o.error][:5]:
            print(f"  error: {o.error}")
    (_, alone, tput1, _), (n, many, tputn, _) = phases
    print(f"together: median wait with {n} clients / alone = {many / alone:.2f}; throughput "
          f"with {n} / alone = {tputn / tput1:.2f}", flush=True)
    if args.engine_baseline:
        waits, wall_n, waits_n = engine_alone(env, int(doc), args.answers, args.answer_tokens, n)
        engine = statistics.median(waits)
        print(f"together: the engine alone (ask() in this process, same library, questions and "
              f"options, after one warm-up) median {engine:.2f} s; one client through the API / "
              f"the engine alone = {alone / engine:.2f}", flush=True)
        tput_n = len(waits_n) / wall_n * 60
        print(f"together: the engine alone, {n} asks at once (threads, no HTTP): median wait "
              f"{statistics.median(waits_n):.2f} s, {tput_n:.1f} answers per minute; "
              f"{n} clients through the API / the engine alone: wait "
              f"{many / statistics.median(waits_n):.2f}, answers a minute {tputn / tput_n:.2f}",
              flush=True)


def engine_alone(env: dict, doc: int, answers: int, tokens: int, together: int
                 ) -> tuple[list[float], float, list[float]]:
    """Wall seconds of ``engine.ask.ask`` (what ``engine ask`` runs: routing, reading, quote,
    evidence lines, answer check, query log) for the questions the lone client asked, in this
    process on the app's library with the app's settings (``Settings.from_env`` of the app's
    environment; decoding in this process), after one warm-up ask; the app stays up but idle
    meanwhile. Then the same with ``together`` threads asking at once, as the API clients did:
    (the lone waits, that phase's wall seconds, its waits)."""
    from app.shared.ask_request import AskRequest
    from engine.ask import ask
    from engine.runtime import Runtime
    from engine.settings import Settings

    # the engine's own decoding in this process, whatever the app's (H2MT_GENERATION_PROCESS)
    settings = Settings.from_env(env).with_(generation_process=False)
    rt = Runtime.load(settings)

    def options(q: str):  # the options /ask makes of the API clients' arguments
        return AskRequest(*ask_args(str(doc), q, "text", tokens)).options(settings)

    ask(rt, doc, QUESTIONS[0], options(QUESTIONS[0]))  # warm-up, as the API phases had
    waits = []
    for r in range(answers):
        q = QUESTIONS[r % len(QUESTIONS)]
        opts = options(q)
        t0 = time.perf_counter()
        ask(rt, doc, q, opts)
        waits.append(time.perf_counter() - t0)
    waits_n: list[float] = []

    def one(i: int, ready) -> None:
        ready()
        for r in range(answers):
            q = QUESTIONS[(i + r) % len(QUESTIONS)]
            t0 = time.perf_counter()
            ask(rt, doc, q, options(q))
            waits_n.append(time.perf_counter() - t0)

    return waits, at_once(together, one), waits_n


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=8, help="0: the soak alone")
    ap.add_argument("--requests", type=int, default=25)
    ap.add_argument("--soak", type=int, default=300)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--together", type=int, default=0,
                    help="clients answering at once, compared with one client alone (0: off)")
    ap.add_argument("--answers", type=int, default=4,
                    help="text answers each client asks in the together phases")
    ap.add_argument("--answer-tokens", type=int, default=128,
                    help="max new tokens of the together phases' answers")
    ap.add_argument("--engine-baseline", action="store_true",
                    help="after the together phases, time the same answers with the engine "
                         "alone (no HTTP, no Gradio) in this process: the API's overhead")
    ap.add_argument("--port", type=int)
    ap.add_argument("--http-timeout", type=float,
                    help="seconds the together and soak clients wait for an HTTP reply (default: "
                         "gradio_client's own, 5 s for joining the queue)")
    ap.add_argument("--library", type=Path,
                    help="a data folder kept (--keep) by an earlier run, holding the manual: no "
                         "new ingest, and the folder is left as it is")
    ap.add_argument("--manual", type=Path, default=CORPUS / MANUAL,
                    help="the manual stored before the clients connect (default: %(default)s)")
    ap.add_argument("--keep", action="store_true", help="keep the data folder")
    ap.add_argument("--rss-out", type=Path,
                    help="write the soak's resident memory after every ask here (one line per "
                         "ask: ask number, MB, seconds, error), as it goes")
    ap.add_argument("--examples", action="store_true",
                    help="let the app index its example manual in the background (off: the "
                         "soak measures the app answering, not a one-off memory write)")
    ap.add_argument("--replicas", type=int, default=1,
                    help="app processes on one library (2 or more need --db; the load phase "
                         "only, no soak)")
    ap.add_argument("--db", help="SQLAlchemy URL of an empty library every replica and the "
                                 "worker share (PostgreSQL)")
    args = ap.parse_args(argv)
    if args.replicas > 1 and not args.db:
        ap.error("--replicas needs --db (one PostgreSQL database for every replica)")

    data = args.library or Path(tempfile.mkdtemp(prefix="h2mt-load-"))
    env = dict(os.environ, H2MT_DATA_DIR=str(data), GRADIO_ANALYTICS_ENABLED="False",
               PYTHONUNBUFFERED="1", H2MT_EXAMPLES="1" if args.examples else "0")
    if args.replicas > 1:
        return run_replicas(args, env, data)
    if args.library is None:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "engine", "ingest", str(args.manual), "--quiet"],
                       cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        print(f"stored {args.manual.name} with its memories in {time.perf_counter() - t0:.0f} s",
              flush=True)
    port = args.port or _free_port()
    url = f"http://127.0.0.1:{port}/"
    log = open(data / "app.log", "w")
    proc = subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_up(url, proc)
        print(f"app up at {url} (pid {proc.pid}, RSS {_rss_mb(proc.pid):.0f} MB)", flush=True)
        doc, node_doc = "1", 1  # the manual stored before any client connected

        report = Report()
        if args.together:
            run_together(args, url, doc, env)
        if args.clients > 0:
            run_load(args, [(url, doc, node_doc)], data, report)
        if args.soak:
            from gradio_client import Client

            http = {"timeout": args.http_timeout} if args.http_timeout else {}
            client = Client(url, verbose=False, httpx_kwargs=http)
            rss, soak = [], Report()
            rss_out = open(args.rss_out, "w") if args.rss_out else None
            for n in range(args.soak):
                mode = "route" if n % 2 else "text"
                timed(soak, f"ask {mode}", client.predict,
                      *ask_args(doc, QUESTIONS[n % len(QUESTIONS)], mode, args.max_new_tokens),
                      api_name="/ask")
                rss.append(_rss_mb(proc.pid))
                if rss_out is not None:
                    o = soak.outcomes[-1]
                    print(n + 1, f"{rss[-1]:.1f}", f"{o.seconds:.2f}", o.error or "",
                          file=rss_out, flush=True)
                if (n + 1) % 50 == 0:
                    print(f"  soak {n + 1}/{args.soak}: RSS {rss[-1]:.0f} MB", flush=True)
            errs = sum(o.error is not None for o in soak.outcomes)
            print(f"\nsoak: {args.soak} asks, {errs} errors; {rss_trend(rss)}; median ask "
                  f"{statistics.median(o.seconds for o in soak.outcomes):.2f} s")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        if args.keep or args.library is not None:
            print(f"data folder kept: {data}")
        else:
            shutil.rmtree(data, ignore_errors=True)


def run_replicas(args, env: dict, data: Path) -> None:
    """The load phase against ``args.replicas`` apps on one library (module docstring)."""
    procs: list[subprocess.Popen] = []
    try:
        urls, docs = start_replicas(args, env, data, procs)
        n = len(urls)
        # client i on replica i mod n asks about the manual uploaded through replica i+1 mod n
        targets = [(urls[r], docs[(r + 1) % n], int(docs[(r + 1) % n])) for r in range(n)]
        for r, (url, doc, _) in enumerate(targets):
            print(f"clients on replica {r} ask about #{doc} (uploaded through replica "
                  f"{(r + 1) % n})", flush=True)
        report = Report()
        if args.clients > 0:
            run_load(args, targets, data, report)
        for r, p in enumerate(procs[:n]):
            print(f"replica {r}: RSS {_rss_mb(p.pid):.0f} MB", flush=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        if args.keep:
            print(f"data folder kept (logs): {data}")
        else:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
