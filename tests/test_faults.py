"""Faults as servers meet them (issue 68), on real file systems, servers and processes: nothing
stored is lost or half-written, the failing action says one line naming the cause, and it
succeeds once the fault is removed.

- A full disk during phase two: a real small file system (a tmpfs, else a loop device) holding
  the SQLite library fills up while ``python -m engine ingest`` (a real process, started from
  the preloaded parent of tests/test_crash.py) writes memories. It prints one JSON error line
  and no traceback; the heights it stored are whole; asks are answered (their log is not
  written: one server-log line and a counter); the same command after space is freed resumes at
  once. The app's memory writer meeting the same fault makes the library say "memories paused:
  the disk is full", and an upload says so in one line.
- PostgreSQL restarted mid-ask (a server of the test's own: tests/support/pg_server.py): the ask
  under way is answered, asks and the library listing during the outage fail in one line, and
  the ask after it is answered and logged by the same runtime.
- Another process holding the SQLite write lock past the lock timeout: an ask is answered, an
  upload (in the app's wrapper and through the CLI) fails in one line naming the lock, nothing
  is lost, and both succeed once the lock is released.
- A served reader's process killed (-9) after the first piece of an answer: the ask ends with
  one line (quote and route kept, nothing logged); the next says the server cannot be reached;
  the same runtime answers once a server is back (the reader's own cases of a broken stream:
  tests/serving/test_remote_reader.py).
- Every handler (``bind``) in the asks' one wrapper: a read-only library and a bug, one line
  each; the classifier's names for PostgreSQL's and the file system's faults.

Each waits on events (a progress line, a process's "held" line, a server's start), never on
sleeps.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import gradio as gr
import pytest

from engine.settings import Settings
from tests.support.forked_cli import preloaded_cli
from tests.support.phase_two import chain_manual, tiny_model_dir  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "How does the valve controller set the pump speed?"
FS_MB = 24


# -- a real small file system ------------------------------------------------------------------

def _mount(kind: str, folder: Path, image: Path) -> bool:
    if kind == "tmpfs":
        argv = ["mount", "-t", "tmpfs", "-o", f"size={FS_MB}m", "tmpfs", str(folder)]
    else:  # a loop device over a file, with an ext4 file system
        with open(image, "wb") as f:
            f.truncate(FS_MB * 2**20)
        if subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True).returncode:
            return False
        argv = ["mount", "-o", "loop", str(image), str(folder)]
    try:
        return subprocess.run(argv, capture_output=True).returncode == 0
    except OSError:
        return False


@pytest.fixture
def small_fs(tmp_path):
    """A real file system of FS_MB MB mounted for the test: a tmpfs, else a loop device."""
    folder = tmp_path / "fs"
    folder.mkdir()
    why = []
    for kind in ("tmpfs", "loop"):
        if _mount(kind, folder, tmp_path / "fs.img"):
            break
        why.append(kind)
    else:
        pytest.skip("cannot mount a small file system here (neither a tmpfs nor a loop device: "
                    "mounting needs root or CAP_SYS_ADMIN)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path) -> Path:
    """Fill the file system of ``folder`` to its last byte; the filler file (remove it to free
    the space)."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (2**20, 2**16, 2**12, 2**9, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
    return filler


def checkpoint(db: Path) -> None:
    """SQLite's write-ahead log folded into the database and truncated, so that the next write
    needs new space on the disk."""
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _settings(tmp_path: Path, model: Path, db_url: str) -> Settings:
    return Settings(data_dir=tmp_path / "data", db_url=db_url, backbone=str(model),
                    reader=str(model), checkpoint=model / "parts.safetensors",
                    dense_encoder="none", write_batch_nodes=2, examples=False)


def _cli_env(model: Path, **extra: str) -> dict:
    return dict(os.environ, PYTHONUNBUFFERED="1", H2MT_BACKBONE=str(model), H2MT_READER=str(model),
                H2MT_CHECKPOINT=str(model / "parts.safetensors"), H2MT_DENSE_ENCODER="none",
                H2MT_WRITE_BATCH_NODES="2", H2MT_EXAMPLES="0", **extra)


def _memory_ids(db: Path, doc: int) -> set[int]:
    with sqlite3.connect(db) as con:
        return {r[0] for r in con.execute("SELECT node_id FROM memories WHERE doc_id = ?", (doc,))}


def _job(db: Path, doc: int) -> tuple:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT state, holder, error FROM memory_jobs WHERE doc_id = ?",
                           (doc,)).fetchone()


def _ask_unlogged(rt, doc: int, mode: str, caplog) -> str:
    """An ask on a library that cannot be written: answered, its log one warning line (the
    line)."""
    from engine.ask import AskOptions, ask

    before = rt.library.unlogged
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="storage.query_log"):
        answer = ask(rt, doc, QUESTION, AskOptions(mode=mode, max_new_tokens=4))
    assert answer.route.selected and answer.query_id is None
    assert rt.library.unlogged == before + 1
    lines = [r.getMessage() for r in caplog.records if r.name == "storage.query_log"]
    assert len(lines) == 1 and "not logged" in lines[0], lines
    return lines[0]


# -- a full disk during phase two ----------------------------------------------------------------

def test_full_disk_during_phase_two_of_the_cli(small_fs, tiny_model_dir, tmp_path, caplog):
    from engine.ask import AskOptions, ask
    from engine.ingest import ingest_file
    from engine.runtime import Runtime

    db = small_fs / "library.sqlite3"
    url = f"sqlite:///{db}"
    md = chain_manual(tmp_path / "chained.md")
    rt = Runtime.load(_settings(tmp_path, tiny_model_dir, url))
    doc = ingest_file(md, rt, memories=False).doc_id  # phase one
    tree = rt.library.get_tree(doc)
    heights = [{n.id for n in level} for level in tree.levels_bottom_up()]
    checkpoint(db)
    args = ["ingest", str(md), "--db", url]
    env = _cli_env(tiny_model_dir, H2MT_DATA_DIR=str(tmp_path / "data"))
    with preloaded_cli(env, tmp_path / "cli") as cli:
        # phase two: once the first memories are written, the process is stopped, the disk
        # filled to its last byte, and the process let go on
        proc = cli.start(args)
        seen = bytearray()
        pattern = re.compile(rb"memories [^\r\n]*?(\d+)/(\d+)")
        t0 = time.monotonic()
        with open(proc.stderr, "rb") as stderr:
            while not any(0 < int(m.group(1)) < int(m.group(2))
                          for m in pattern.finditer(seen[-4096:])):
                seen.extend(stderr.read())
                assert proc.poll() is None, f"phase two ended before the fill: {seen[-2000:]!r}"
                assert time.monotonic() - t0 < 240, seen[-2000:]
                time.sleep(0.005)
        os.kill(proc.pid, signal.SIGSTOP)
        filler = fill(small_fs)
        os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait(timeout=240) == 1
        out, err = Path(proc.stdout).read_text(), Path(proc.stderr).read_text()
        assert "Traceback" not in err, err[-3000:]
        [line] = out.splitlines()
        error = json.loads(line)["error"]
        assert error.startswith("Writing the memories failed: the disk is full."), error
        assert "The manual is stored" in error, error

        # what was stored is whole tree heights; the job is given back, or held by the CLI
        # that could not write that it gave it back (a process that is gone)
        stored = _memory_ids(db, doc)
        whole = [h for h in heights if h <= stored]
        assert stored == set().union(*whole) and len(whole) < len(heights), (len(stored),)
        state, holder, job_error = _job(db, doc)
        print(f"\nthe job after the full disk: {state} ({job_error or holder})")
        assert (state, job_error) == ("pending", "paused: the disk is full") or (
            state == "running" and f":{proc.pid}:" in holder), (state, holder, job_error)

        # asks while the disk is full: answered, not logged (one line each), no error
        assert "the disk is full" in _ask_unlogged(rt, doc, "route", caplog)
        _ask_unlogged(rt, doc, "text", caplog)

        # space freed: the same command resumes at once (no wait for another worker's lease)
        filler.unlink()
        again = cli.start(args)
        assert again.wait(timeout=240) == 0, Path(again.stderr).read_text()[-3000:]
        err = Path(again.stderr).read_text()
        assert "another worker" not in err and "Traceback" not in err, err[-3000:]
        result = json.loads(Path(again.stdout).read_text().splitlines()[-1])
        assert result["doc_id"] == doc and result["memories"] == "complete", result
    assert _memory_ids(db, doc) == set().union(*heights)
    assert _job(db, doc)[0] == "done"
    logged = ask(rt, doc, QUESTION, AskOptions(mode="route"))
    assert logged.query_id is not None
    rt.library.close()


def test_full_disk_in_the_apps_memory_writer(small_fs, tiny_model_dir, tmp_path, caplog):
    """The app's background writer (app/shared/memory_writer.py) meets a full disk after its
    first stored height: the library says "memories paused: the disk is full", an upload says
    so in one line, and the writer resumes at once once space is freed."""
    from app.library.library_tab import alone, library_line, library_rows, upload
    from app.shared.memory_writer import MemoryWriter
    from app.shared.state import AppState
    from engine.ingest import ingest_file
    from engine.runtime import Runtime

    db = small_fs / "library.sqlite3"
    rt = Runtime.load(_settings(tmp_path, tiny_model_dir, f"sqlite:///{db}"))
    doc = ingest_file(chain_manual(tmp_path / "chained.md"), rt, memories=False).doc_id
    checkpoint(db)
    filled: list[Path] = []

    def write(doc_id, progress, store):  # the worker's own write; the disk fills after a height
        def store_then_fill(new):
            store(new)
            if not filled:
                filled.append(fill(small_fs))
        return writer.worker.write_document(doc_id, progress, store_then_fill)

    writer = MemoryWriter(rt, write=write)
    s = AppState(rt, rt.settings, writer)
    writer.jobs.enqueue(doc, rt.fingerprint)
    assert writer.worker.run_one() == doc  # phase two, as the writer's thread runs it
    assert filled, "the disk was not filled during phase two"
    d = rt.library.get_document(doc)
    label = s.memory_label(d)
    assert re.fullmatch(r"memories paused: the disk is full \(\d+/\d+ written\)", label), label
    rows = library_rows(s)  # the listing still works
    assert rows[0][7] == label
    assert library_line({doc: label}).startswith("Memories are paused (#1: the disk is full")
    from app.shared.memory_lines import agreeing_notice  # memory mode asked meanwhile
    assert agreeing_notice(s, str(doc), "memories are being written (3/9 nodes); memory mode "
                           "needs them").startswith("Memories are paused (the disk is full; ")
    tab = alone(s)
    status = upload(s, tab, [str(_other_manual(tmp_path))],
                    progress=lambda *a, **k: None)[tab.status]
    assert re.fullmatch(r"✗ other\.md: Storing it failed: the disk is full\. Nothing half-written "
                        r"was kept; free some space, then try again\. \(ref \w+ in the server's "
                        r"log\)", status), status
    assert [x.id for x in rt.library.list_documents()] == [doc]

    filled[0].unlink()
    assert writer.worker.run_one() == doc  # taken again at once, though it may still hold it
    assert rt.library.memory_progress(doc, rt.fingerprint).complete
    assert s.memory_label(d) == "ready"
    rt.library.close()


def _other_manual(tmp_path: Path) -> Path:
    p = tmp_path / "other.md"
    p.write_text("# Other manual\n\n## Wiring\n\nConnect the bus cable to port B, then switch the "
                 "controller on and wait for the green light.\n")
    return p


# -- PostgreSQL restarted in the middle of an ask ------------------------------------------------

def test_postgresql_restarted_mid_ask(tiny_model_dir, tmp_path, caplog):
    from app.library.library_tab import alone, poll, refresh
    from app.library.outline import outline
    from app.shared.binding import bind
    from app.shared.memory_writer import MemoryWriter
    from app.shared.state import AppState
    from app.shared.user_errors import user_errors
    from engine.answer.events import AnswerReady, RouteReady
    from engine.ask import AskOptions, ask, ask_stream
    from engine.ingest import ingest_file
    from engine.runtime import Runtime
    from tests.support.pg_server import pg_server_or_skip

    server = pg_server_or_skip()
    try:
        rt = Runtime.load(_settings(tmp_path, tiny_model_dir, server.url))
        doc = ingest_file(chain_manual(tmp_path / "chained.md"), rt).doc_id
        before = _pg_counts(rt.library.engine)
        events = ask_stream(rt, doc, QUESTION, AskOptions(mode="text", max_new_tokens=4))
        assert isinstance(next(events), RouteReady)
        s = AppState(rt, rt.settings, MemoryWriter(rt))
        tab = alone(s)  # the page as it was loaded, before the database went away
        server.stop()  # the database goes away in the middle of the ask
        [answer] = [ev.answer for ev in events if isinstance(ev, AnswerReady)]
        assert answer.query_id is None and rt.library.unlogged == 1
        for what, action in (("Answering", lambda: ask(rt, doc, QUESTION,
                                                       AskOptions(mode="route"))),
                             ("Listing the library", bind(s, refresh, tab)),  # the Library tab's
                             ("Showing the outline", lambda: bind(s, outline, tab)(str(doc)))):
            with pytest.raises(gr.Error) as e, user_errors(what):
                action()
            assert e.value.message.startswith(f"{what} failed: the database cannot be reached. "
                                              "Nothing half-written was kept; try again once it "
                                              "is back. (ref "), e.value
        # the Library tab's timer: the line in place of the memory line, the rows as shown
        line = bind(s, poll, tab)("", None)[tab.mem_line]
        assert line.startswith("**Listing the library failed: the database cannot be reached.")
        server.start()
        after = ask(rt, doc, QUESTION, AskOptions(mode="text", max_new_tokens=4))
        assert after.query_id is not None  # the same runtime: no restart of the app
        assert _pg_counts(rt.library.engine) == {**before, "queries": before["queries"] + 1}
        rt.library.close()
    finally:
        server.close()


def _pg_counts(engine) -> dict[str, int]:
    from sqlalchemy import text

    with engine.connect() as con:
        return {t: con.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
                for t in ("documents", "nodes", "evidence", "memories", "queries")}


# -- a lock held past the timeout ----------------------------------------------------------------

HOLDER = """
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN IMMEDIATE")
con.execute("INSERT INTO queries (question, mode, answer, created_at) "
            "VALUES ('held', 'route', 'kept', '2026-01-01 00:00:00.000000')")
print("held", flush=True)
sys.stdin.readline()
con.execute("COMMIT")
"""


def test_sqlite_lock_held_past_the_timeout(tiny_model_dir, tmp_path, monkeypatch, caplog):
    from app.library.library_tab import alone, upload
    from app.shared.memory_writer import MemoryWriter
    from app.shared.state import AppState
    from app.shared.user_errors import user_errors
    from engine.ask import AskOptions, ask
    from engine.ingest import ingest_file
    from engine.runtime import Runtime

    monkeypatch.setenv("H2MT_DB_LOCK_TIMEOUT_S", "1")
    db = tmp_path / "library.sqlite3"
    url = f"sqlite:///{db}"
    rt = Runtime.load(_settings(tmp_path, tiny_model_dir, url))
    doc = ingest_file(chain_manual(tmp_path / "chained.md"), rt).doc_id
    other = _other_manual(tmp_path)
    s = AppState(rt, rt.settings, MemoryWriter(rt))
    tab = alone(s)  # the page as it was loaded, before the lock was taken
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"  # the lock is held from now on
        line = _ask_unlogged(rt, doc, "route", caplog)
        assert "locked by another process (waited 1 s)" in line, line
        with pytest.raises(gr.Error) as e, user_errors("Uploading"):
            ingest_file(other, rt, memories=False)
        assert e.value.message.startswith(
            "Uploading failed: the database is locked by another process (waited 1 s). Nothing "
            "was lost; try again once the other process is done. (ref "), e.value
        status = upload(s, tab, [str(other)], progress=lambda *a, **k: None)[tab.status]
        assert status.startswith("✗ other.md: Storing it failed: the database is locked by "
                                 "another process (waited 1 s)."), status
        cli = subprocess.run([sys.executable, "-m", "engine", "ingest", str(other), "--text-only",
                              "--db", url], cwd=ROOT, capture_output=True, text=True, timeout=300,
                             env=_cli_env(tiny_model_dir, H2MT_DB_LOCK_TIMEOUT_S="1",
                                          H2MT_DATA_DIR=str(tmp_path / "data")))
        assert cli.returncode == 1 and "Traceback" not in cli.stderr, cli.stderr[-3000:]
        [out] = cli.stdout.splitlines()
        assert json.loads(out)["error"].startswith(
            "Storing it failed: the database is locked by another process (waited 1 s)."), out
    finally:
        holder.communicate("\n", timeout=60)  # released: the holder commits its own write
    assert holder.returncode == 0
    with sqlite3.connect(db) as con:  # nothing lost: the holder's row, and nothing half-stored
        assert con.execute("SELECT count(*) FROM queries WHERE question = 'held'").fetchone() == (1,)
    assert [d.id for d in rt.library.list_documents()] == [doc]
    assert ingest_file(other, rt, memories=False).doc_id != doc
    assert ask(rt, doc, QUESTION, AskOptions(mode="route")).query_id is not None
    rt.library.close()


# -- every handler in the one wrapper; the classifier's names ------------------------------------

def test_every_handler_says_a_storage_fault_in_one_line(tmp_path, caplog):
    """``bind`` (every tab's and API's handler) wraps like the asks: a real read-only library
    written to is one line naming it; a bug is one line with a reference to its traceback."""
    from app.shared.binding import bind
    from storage import Library, QueryEntry

    db = tmp_path / "library.sqlite3"
    Library(f"sqlite:///{db}").close()
    lib = Library(f"sqlite:///file:{db}?mode=ro&uri=true")  # opens: nothing to sweep, no write

    def refresh(s):  # a handler that writes (named as the library's listing is)
        s.log_query(QueryEntry("q", "route"))

    def outline(s):
        raise KeyError("a bug")

    with pytest.raises(gr.Error) as e:
        bind(lib, refresh)()
    assert e.value.message.startswith("Listing the library failed: the database is read-only. "
                                      "Nothing was stored; make the library writable, then try "
                                      "again. (ref "), e.value.message
    ref = re.search(r"ref (\w+)", e.value.message).group(1)
    assert any(ref in r.getMessage() and "read-only" in r.getMessage() and not r.exc_info
               for r in caplog.records)
    with pytest.raises(gr.Error) as e:
        bind(lib, outline)()
    assert e.value.message.startswith("Showing the outline failed (internal error, ref ")
    assert any(r.exc_info and r.exc_info[0] is KeyError for r in caplog.records)
    lib.close()


def test_the_classifier_names_postgresql_and_file_system_faults():
    from sqlalchemy.exc import IntegrityError, OperationalError
    psycopg_errors = pytest.importorskip("psycopg.errors")
    from storage.faults import DISK_FULL, LOCKED, READ_ONLY, UNREACHABLE, classify

    def wrapped(orig):
        return OperationalError("SELECT 1", {}, orig)

    assert classify(wrapped(psycopg_errors.DiskFull("no space"))).kind == DISK_FULL
    assert classify(wrapped(psycopg_errors.ReadOnlySqlTransaction("ro"))).kind == READ_ONLY
    assert classify(wrapped(psycopg_errors.LockNotAvailable("lock"))).kind == LOCKED
    assert classify(wrapped(psycopg_errors.AdminShutdown("bye"))).kind == UNREACHABLE
    assert classify(OSError(errno.ENOSPC, "No space left on device")).kind == DISK_FULL
    assert classify(OSError(errno.EROFS, "Read-only file system")).kind == READ_ONLY
    assert classify(IntegrityError("INSERT", {}, Exception("UNIQUE"))) is None  # not a fault
    assert classify(KeyError("a bug")) is None


def test_the_ask_tab_shows_the_answer_before_its_log(tiny_model_dir, tmp_path, monkeypatch,
                                                     caplog):
    """The Ask tab's handler (do_ask) with the library's write lock held past the timeout by
    another process: the answer is shown, and nothing fails (no feedback bar: nothing logged
    to rate); once released, the next answer's last update carries its logged id and history."""
    from app.ask import ask_tab
    from app.ask.ask_handlers import do_ask
    from app.shared.ask_request import AskRequest
    from app.shared.memory_writer import MemoryWriter
    from app.shared.state import AppState
    from engine.ingest import ingest_file
    from engine.runtime import Runtime

    monkeypatch.setenv("H2MT_DB_LOCK_TIMEOUT_S", "1")
    db = tmp_path / "library.sqlite3"
    rt = Runtime.load(_settings(tmp_path, tiny_model_dir, f"sqlite:///{db}"))
    doc = ingest_file(chain_manual(tmp_path / "chained.md"), rt).doc_id
    s = AppState(rt, rt.settings, MemoryWriter(rt))
    with gr.Blocks(), gr.Tabs():
        t = ask_tab.build(s)
    req = AskRequest(doc=str(doc), question=QUESTION, mode="route", k=2, max_depth=0, budget=0,
                     gate=True, hier_pos=False, max_new_tokens=8, router="lexical")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        updates = list(do_ask(s, t, req))
        assert updates[-1][t.answer] and updates[-1][t.view].query_id is None
        assert rt.library.unlogged == 1
    finally:
        holder.communicate("\n", timeout=60)
    updates = list(do_ask(s, t, req))
    shown, logged = updates[-2], updates[-1]
    assert shown[t.view].query_id is None  # the answer on the page before its log is written
    assert logged[t.answer] == shown[t.answer]
    assert logged[t.view].query_id == rt.library.list_queries()[-1].id
    assert any(QUESTION in str(row) for row in logged[t.history])
    rt.library.close()


# -- a served reader killed in the middle of an answer -------------------------------------------

READER = r"""
import json, socket, sys, threading
port, hang = int(sys.argv[1]), sys.argv[2] == "hang"  # hang: after the first piece
sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", port))
sock.listen(8)
print(sock.getsockname()[1], flush=True)

def one(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    if data.startswith(b"POST") and b"chat/completions" in data.split(b"\r\n")[0]:
        def piece(delta, finish):
            event = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            data = f"data: {json.dumps(event)}\n\n".encode()
            return f"{len(data):x}\r\n".encode() + data + b"\r\n"
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                     + piece({"content": "The"}, None))
        print("answering", flush=True)
        if hang:
            threading.Event().wait()  # until killed
        done = b"data: [DONE]\n\n"
        conn.sendall(piece({"content": " widget"}, None) + piece({}, "stop")
                     + f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
        conn.close()
        return
    body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    conn.close()

while True:
    conn, _ = sock.accept()
    threading.Thread(target=one, args=(conn,), daemon=True).start()
"""


def test_a_served_reader_killed_mid_answer(tiny_backbone, tmp_path):
    """The reader's server process is killed (-9) after the first piece of an answer: the ask
    ends with one line (the quote and route kept, nothing logged), the next ask says the
    server cannot be reached, and the same runtime answers once a server is back."""
    import threading

    from engine.ask import AskOptions, ask
    from engine.ingest import ingest_file
    from tests.support.runtime import MANUAL
    from tests.test_ask_served import served_runtime

    def serve(port: int, how: str):
        proc = subprocess.Popen([sys.executable, "-c", READER, str(port), how],
                                stdout=subprocess.PIPE, text=True)
        return proc, int(proc.stdout.readline())  # listening

    server, port = serve(0, "hang")
    url = f"http://127.0.0.1:{port}/v1"
    rt = served_runtime(tiny_backbone, tmp_path, url, "m")
    md = tmp_path / "widgets.md"
    md.write_text(MANUAL)
    doc = ingest_file(md, rt).doc_id
    got = []
    asking = threading.Thread(target=lambda: got.append(ask(
        rt, doc, "How do I power a large widget?", AskOptions(mode="text", max_new_tokens=8))))
    try:
        asking.start()
        assert server.stdout.readline().strip() == "answering"  # the first piece is out
        server.kill()
        server.wait()
        asking.join(120)
        assert not asking.is_alive()
    finally:
        if server.poll() is None:
            server.kill()
    out = got[0].as_json()
    assert out["reader_error"].startswith(f"the reader at {url}/chat/completions broke off the "
                                          "answer after 1 pieces"), out["reader_error"]
    assert "\n" not in out["reader_error"] and out["quote"] is not None and out["route"]
    down = ask(rt, doc, "How do I power a large widget?", AskOptions(mode="text",
                                                                      max_new_tokens=4))
    assert "cannot be reached" in down.reader_error
    assert rt.library.list_queries() == []  # no answer, nothing logged
    server, _ = serve(port, "finish")  # the server back, on the same address
    try:
        back = ask(rt, doc, "How do I power a large widget?",
                   AskOptions(mode="text", max_new_tokens=8))
    finally:
        server.kill()
        server.wait()
    assert back.reader_error is None and back.text.startswith("The widget"), back.as_json()
    assert back.query_id is not None
    rt.library.close()
