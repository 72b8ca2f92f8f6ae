"""Crash safety: a process killed in the middle of an ingest leaves a consistent library.

The real thing: ``python -m engine ingest`` on a corpus PDF into a temporary SQLite library,
``kill -9`` at varied moments, ten times in each phase:
- phase one (tree + routing evidence, one transaction): all or nothing, never a document
  without its nodes and evidence;
- phase two (memories, one transaction per tree height): the document stays askable, its
  memories are a prefix of whole heights, memory mode refuses them, and the next ingest of the
  same file resumes and completes them.
Also: the startup sweep of leftovers (orphan rows, half-written model caches).
"""
from __future__ import annotations

import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
PDF = "camlidl-manual_no-outline.pdf"
RUNS_PER_PHASE = 10
TABLES = ("documents", "nodes", "evidence", "memories")


def _progress(stage: str) -> re.Pattern:
    return re.compile(stage.encode() + rb" [^\r\n]*?(\d+)/(\d+)")


def _counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as con:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def _ingest_and_kill(pdf: Path, db: Path, stage: str, delay: float, min_done: int = 1) -> str:
    """Start the CLI, wait for its first ``stage`` progress line with at least ``min_done``
    nodes done, sleep ``delay`` seconds, kill -9."""
    env = dict(os.environ, H2MT_WRITE_BATCH_NODES="2", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine", "ingest", str(pdf), "--db", f"sqlite:///{db}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = bytearray()
    seen = threading.Event()
    pattern = _progress(stage)

    def read():
        while chunk := os.read(proc.stderr.fileno(), 4096):
            err.extend(chunk)
            if any(int(x.group(1)) >= min_done for x in pattern.finditer(err)):
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not seen.wait(timeout=240):
            raise AssertionError(f"no {stage} progress; stderr: {err[-2000:].decode(errors='replace')}")
        time.sleep(delay)
        assert proc.poll() is None, "the ingest finished before the kill: raise the PDF size"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    reader.join(timeout=5)
    assert proc.returncode == -signal.SIGKILL
    return err.decode(errors="replace")


def _heights_complete(db: Path) -> bool:
    """The stored memories are exactly the nodes of the lowest few tree heights."""
    with sqlite3.connect(db) as con:
        nodes = con.execute("SELECT node_id, parent FROM nodes").fetchall()
        have = {r[0] for r in con.execute("SELECT node_id FROM memories")}
    children: dict[int, list[int]] = {}
    for nid, parent in nodes:
        children.setdefault(parent, []).append(nid)
    height: dict[int, int] = {}

    def h(n: int) -> int:
        if n not in height:
            height[n] = 1 + max((h(c) for c in children.get(n, [])), default=-1)
        return height[n]
    levels = sorted({h(n) for n, _ in nodes})
    done = [lv for lv in levels if all(n in have for n, _ in nodes if h(n) == lv)]
    return have == {n for n, _ in nodes if h(n) in done} and done == levels[:len(done)]


@pytest.mark.real_model
def test_kill_in_phase_one_leaves_all_or_nothing(shared_dir, tmp_path):
    from storage import Library

    pdf = shared_dir / "corpus" / PDF
    db = tmp_path / "library.sqlite3"
    Library(f"sqlite:///{db}").close()  # the schema exists, so the counts below can be read
    rng = random.Random(0)
    # The first kill lands as phase one starts encoding; the others anywhere up to its commit
    # and after it.
    delays = [0.0] + [rng.uniform(0.0, 1.5) for _ in range(RUNS_PER_PHASE - 1)]
    outcomes = []
    for run, delay in enumerate(delays):
        if db.exists():
            db.unlink()
        Library(f"sqlite:///{db}").close()
        _ingest_and_kill(pdf, db, "evidence", delay, min_done=0)
        Library(f"sqlite:///{db}").close()  # the startup sweep of a new process
        c = _counts(db)
        if c["documents"] == 0:
            assert c == {t: 0 for t in TABLES}, (run, c)
            outcomes.append("nothing")
        else:  # the kill came after the commit: the whole phase is there
            assert c["documents"] == 1 and c["nodes"] == c["evidence"] > 0, (run, c)
            outcomes.append("phase one whole")
    assert "nothing" in outcomes
    print(f"\nkill -9 in phase one, {RUNS_PER_PHASE} runs: {outcomes}")


@pytest.mark.real_model
def test_kill_in_phase_two_resumes(shared_dir, tmp_path, tiny_backbone, tiny_parts):
    from engine.ask import AskError, AskOptions, ask
    from engine.ingest import ingest_file
    from engine.runtime import Runtime
    from storage import Library

    pdf = shared_dir / "corpus" / PDF
    db = tmp_path / "library.sqlite3"
    rng = random.Random(1)
    written = []
    for run in range(RUNS_PER_PHASE):
        _ingest_and_kill(pdf, db, "memories", rng.uniform(0.0, 2.0))
        Library(f"sqlite:///{db}").close()
        c = _counts(db)
        assert c["documents"] == 1 and c["nodes"] == c["evidence"] > 0, (run, c)
        assert c["memories"] < c["nodes"], "the kill came after phase two finished"
        assert _heights_complete(db), f"run {run}: a partly written tree height was stored"
        written.append(c["memories"])
        if run < RUNS_PER_PHASE - 1:  # each run starts phase two afresh; the last one resumes
            with sqlite3.connect(db) as con:
                con.execute("DELETE FROM memories")
    print(f"\nkill -9 in phase two, {RUNS_PER_PHASE} runs: memories stored {written}")

    # The real backbone wrote those memories; a runtime with another model asks in text mode
    # (routing on evidence) but not in memory mode, then completes the memories on re-ingest.
    settings = Settings(data_dir=tmp_path, db_url=f"sqlite:///{db}", dense_encoder="none")
    rt = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    doc = rt.library.list_documents()[0].id
    with pytest.raises(AskError, match="memories are being written"):
        ask(rt, doc, "What is camlidl?", AskOptions(mode="memory", max_new_tokens=4))
    routed = ask(rt, doc, "What is camlidl?", AskOptions(mode="route"))
    assert routed.route.selected and "memory" not in routed.route.channels
    r = ingest_file(pdf, rt)
    assert r.reused and r.memories == "complete"
    assert rt.library.memory_progress(doc, rt.fingerprint).complete
    ans = ask(rt, doc, "What is camlidl?", AskOptions(mode="route", router="memory"))
    assert ans.route.router == "memory" and ans.route.selected
    rt.library.close()


def test_startup_sweeps_orphans_and_unfinished_documents(tmp_path):
    """Rows an older version (or a database without foreign keys) may have left are removed."""
    from storage import Library

    db = tmp_path / "old.sqlite3"
    Library(f"sqlite:///{db}").close()
    with sqlite3.connect(db) as con:  # foreign keys off, as an old or foreign writer would be
        con.execute("INSERT INTO documents (id, title, file_name, sha256, pages, tree_source, "
                    "n_nodes, depth, tokens, created_at, tree_ms, memory_ms, status) VALUES "
                    "(7, 't', 'f.pdf', 'abc', 1, 'outline', 1, 0, 1, '2024-01-01', 0, 0, "
                    "'writing')")
        con.execute("INSERT INTO nodes (doc_id, node_id, parent, position, depth, title, text, "
                    "tokens, kind) VALUES (7, 0, NULL, 0, 0, 't', '', 0, 'root'), "
                    "(99, 0, NULL, 0, 0, 'orphan', '', 0, 'root')")
        con.execute("INSERT INTO memories (doc_id, node_id, fingerprint, dtype, dim, blob) "
                    "VALUES (99, 0, 'fp', 'float32', 1, x'00000000')")
    lib = Library(f"sqlite:///{db}")
    assert lib.recovered == {"memories": 1, "evidence": 0, "nodes": 2, "documents": 1}
    assert lib.list_documents() == []
    assert _counts(db) == {t: 0 for t in TABLES}
    lib.close()


def test_half_written_model_caches_are_removed(tmp_path):
    from engine.memory.backbone import clean_partial_caches

    folder = tmp_path / "model-abc"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = [tmp_path / "model-abc.partial", tmp_path / f"model-abc.partial-{dead.pid}"]
    live = tmp_path / f"model-abc.partial-{os.getppid()}"  # a running process: kept
    for d in (*stale, live):
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"half")
    removed = clean_partial_caches(folder)
    assert sorted(removed) == sorted(stale)
    assert live.is_dir() and not any(d.exists() for d in stale)
