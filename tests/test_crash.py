"""Crash safety: a process killed in the middle of an ingest leaves nothing of that document.

The real thing: ``python -m engine ingest`` on a corpus PDF into a temporary SQLite library,
``kill -9`` while it writes memories (after its progress line), a few times with different
delays; then the library holds no document, node or memory, and the same file goes in.
Also: the startup sweep of leftovers (orphan rows, half-written model caches).
"""
from __future__ import annotations

import os
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
KILL_DELAYS_S = (0.0, 0.7, 2.0)  # after the first "memories n/N" progress line
PROGRESS = re.compile(rb"memories [^\r\n]*?(\d+)/(\d+)")


def _counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as con:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("documents", "nodes", "memories")}


def _ingest_and_kill(pdf: Path, db: Path, delay: float) -> int:
    """Start the CLI, wait until it has written some memories, kill -9; the nodes done."""
    env = dict(os.environ, H2MT_WRITE_BATCH_NODES="2", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine", "ingest", str(pdf), "--db", f"sqlite:///{db}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = bytearray()
    seen = threading.Event()

    def read():
        while chunk := os.read(proc.stderr.fileno(), 4096):
            err.extend(chunk)
            m = [x for x in PROGRESS.finditer(err) if int(x.group(1)) > 0]
            if m:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not seen.wait(timeout=240):
            raise AssertionError(f"no progress line; stderr: {err[-2000:].decode(errors='replace')}")
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
    last = [int(x.group(1)) for x in PROGRESS.finditer(err)]
    return max(last)


@pytest.mark.real_model
def test_kill_during_ingest_leaves_nothing(shared_dir, tmp_path, tiny_backbone, tiny_parts):
    from engine.ingest import ingest_file
    from engine.runtime import Runtime
    from storage import Library

    pdf = shared_dir / "corpus" / PDF
    db = tmp_path / "library.sqlite3"
    Library(f"sqlite:///{db}").close()  # the schema exists, so the counts below can be read
    kills = []
    for delay in KILL_DELAYS_S:
        done = _ingest_and_kill(pdf, db, delay)
        kills.append(done)
        assert _counts(db) == {"documents": 0, "nodes": 0, "memories": 0}, delay
    print(f"\nkill -9 during ingest: {len(kills)} times, after {kills} memories written")

    # The next start cleans up and the same file goes in (tiny backbone: seconds, not minutes).
    settings = Settings(data_dir=tmp_path, db_url=f"sqlite:///{db}")
    rt = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    r = ingest_file(pdf, rt)
    assert not r.reused and r.pages == 26
    c = _counts(db)
    assert c["documents"] == 1 and c["nodes"] == r.nodes and c["memories"] == r.nodes
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
    assert lib.recovered == {"memories": 1, "nodes": 2, "documents": 1}
    assert lib.list_documents() == []
    assert _counts(db) == {"documents": 0, "nodes": 0, "memories": 0}
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
