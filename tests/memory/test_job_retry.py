"""Memory jobs heal (issue 44), on SQLite and on the real PostgreSQL (H2MT_TEST_PG_URL,
scripts/postgres.sh): a write that fails once (a transient error) completes after a retry with a
backoff; PostgreSQL's connection killed mid-write (pg_terminate_backend) leaves the job to finish
on its retry with every node stored once; the worker's loop survives a database error; Ctrl-C
gives the job back with its attempts reset; ``engine ingest``'s phase two holds the job's lease.
"""
from __future__ import annotations

import threading

import pytest
import torch
from sqlalchemy import create_engine, event, func, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from engine.memory import worker as worker_module
from engine.settings import Settings
from storage.models import Base, MemoryRow
from tests.support.library import PG_URL
from tests.support.runtime import tagged_manual

PG = pytest.param("postgresql", marks=pytest.mark.skipif(
    not PG_URL, reason="set H2MT_TEST_PG_URL (scripts/postgres.sh) to run on PostgreSQL"))


@pytest.fixture(params=["sqlite", PG])
def rt(request, tmp_path, tiny_backbone, tiny_parts, monkeypatch):
    from engine.runtime import Runtime
    from storage import Library

    monkeypatch.setattr(worker_module, "RETRY_S", 0.05)
    url = PG_URL if request.param == "postgresql" else None
    settings = Settings(data_dir=tmp_path, db_url=url, dense_encoder="none",
                        write_batch_nodes=2, worker_poll_s=0.05, job_lease_s=30)
    lib = Library(settings.database_url)
    if url:
        Base.metadata.drop_all(lib.engine)
        Base.metadata.create_all(lib.engine)
    runtime = Runtime(settings, tiny_backbone, tiny_parts, lib)
    yield runtime
    if url:
        Base.metadata.drop_all(lib.engine)
    lib.close()


def _doc(rt, tmp_path) -> int:
    from engine.ingest import ingest_file

    md = tmp_path / "m.md"
    md.write_text(tagged_manual("tag") * 3)
    return ingest_file(md, rt, memories=False).doc_id


def _stored(rt, doc: int) -> dict[int, int]:
    """node id -> memory rows stored for it."""
    with rt.library.engine.connect() as con:
        rows = con.execute(select(MemoryRow.node_id, func.count()).where(
            MemoryRow.doc_id == doc).group_by(MemoryRow.node_id)).all()
    return {int(n): int(c) for n, c in rows}


def test_a_write_that_fails_once_completes_after_a_retry(rt, tmp_path):
    from engine.ingest import memory_worker

    doc = _doc(rt, tmp_path)
    calls = []

    def flaky(doc_id, progress, store):
        calls.append(doc_id)
        if len(calls) == 1:
            raise OperationalError("INSERT ...", {}, ConnectionError("connection reset"))
        return w.write_document(doc_id, progress, store)

    w = memory_worker(rt, write=flaky)
    w.enqueue(doc)
    w.run(until_idle=True)
    job = w.jobs.get(doc, rt.fingerprint)
    assert calls == [doc, doc] and job.state == "done" and job.attempts == 2
    n = rt.library.get_document(doc).n_nodes
    assert _stored(rt, doc) == {i: 1 for i in range(n)}


def test_a_bug_fails_at_once_and_ctrl_c_gives_the_job_back(rt, tmp_path):
    from engine.ingest import memory_worker

    doc = _doc(rt, tmp_path)

    def interrupted(doc_id, progress, store):
        raise KeyboardInterrupt

    w = memory_worker(rt, write=interrupted)
    w.enqueue(doc)
    with pytest.raises(KeyboardInterrupt):
        w.run_one()
    job = w.jobs.get(doc, rt.fingerprint)
    assert (job.state, job.holder, job.attempts) == ("pending", None, 0)

    def buggy(doc_id, progress, store):
        raise KeyError("a bug")

    memory_worker(rt, write=buggy).run_one()
    job = w.jobs.get(doc, rt.fingerprint)
    assert job.state == "failed" and "KeyError" in job.error and job.attempts == 1


def test_the_worker_loop_survives_a_database_error(rt, tmp_path):
    from engine.ingest import memory_worker

    doc = _doc(rt, tmp_path)
    w = memory_worker(rt)
    w.enqueue(doc)
    real_claim, failures = w.jobs.claim, []

    def claim(*a, **kw):
        if len(failures) < 2:
            failures.append(1)
            raise OperationalError("SELECT ...", {}, ConnectionError("server restarting"))
        return real_claim(*a, **kw)

    w.jobs.claim = claim
    t = threading.Thread(target=lambda: w.run(until_idle=True))
    t.start()
    t.join(120)
    assert not t.is_alive() and len(failures) == 2
    assert rt.library.memory_progress(doc, rt.fingerprint).complete


def test_the_cli_ingest_writes_under_the_jobs_lease(rt, tmp_path):
    from engine.ingest import ingest_file
    from storage import MemoryJobs

    md = tmp_path / "cli.md"
    md.write_text(tagged_manual("cli") * 2)
    leases = []
    jobs_beat = MemoryJobs.beat

    def beat(self, job, holder, *a, **kw):
        leases.append(holder)
        return jobs_beat(self, job, holder, *a, **kw)

    MemoryJobs.beat = beat
    try:
        r = ingest_file(md, rt)  # phase two in this call
    finally:
        MemoryJobs.beat = jobs_beat
    job = MemoryJobs(rt.library).get(r.doc_id, rt.fingerprint)
    assert job.state == "done" and leases and job.holder is None
    assert rt.library.memory_progress(r.doc_id, rt.fingerprint).complete


@pytest.mark.skipif(not PG_URL, reason="pg_terminate_backend needs PostgreSQL (H2MT_TEST_PG_URL)")
@pytest.mark.parametrize("rt", [PG], indirect=True)
def test_a_connection_killed_mid_write_is_retried_with_nothing_written_twice(rt, tmp_path):
    from engine.ingest import memory_worker, write_document_memories
    from sqlalchemy.sql.dml import Insert

    doc = _doc(rt, tmp_path)
    n = rt.library.get_document(doc).n_nodes
    write_document_memories(doc, rt)  # an uninterrupted run, for the values
    clean = rt.library.get_memories(doc, rt.fingerprint)
    with rt.library.engine.begin() as con:
        con.execute(text("DELETE FROM memories WHERE doc_id = :d"), {"d": doc})

    admin = create_engine(PG_URL, poolclass=NullPool)
    inserts, killed = [], []

    def before_cursor_execute(conn, cursor, statement, params, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO MEMORIES"):
            inserts.append(1)
            if len(inserts) == 2 and not killed:  # the second height's INSERT, mid-transaction
                pid = conn.connection.dbapi_connection.info.backend_pid
                with admin.connect() as a:
                    killed.append(a.execute(text("SELECT pg_terminate_backend(:p)"),
                                            {"p": pid}).scalar())

    event.listen(rt.library.engine, "before_cursor_execute", before_cursor_execute)
    try:
        w = memory_worker(rt)
        w.enqueue(doc)
        w.run(until_idle=True)
    finally:
        event.remove(rt.library.engine, "before_cursor_execute", before_cursor_execute)
        admin.dispose()
    assert killed == [True]
    job = w.jobs.get(doc, rt.fingerprint)
    assert job.state == "done" and job.attempts == 2, job
    assert _stored(rt, doc) == {i: 1 for i in range(n)}  # every node stored once
    got = rt.library.get_memories(doc, rt.fingerprint)
    assert got.keys() == clean.keys()
    assert all(torch.allclose(got[i], clean[i], atol=1e-5) for i in got)  # float32 rounding


def test_the_library_says_when_no_worker_takes_a_job(rt, tmp_path):
    """A replica with H2MT_APP_WORKER=0 and no worker running: the job waits, and past
    UNCLAIMED_S the Library tab says nobody takes it; a retried job says it is retrying."""
    from dataclasses import replace

    from app.shared.memory_writer import UNCLAIMED_S, MemoryWriter
    from app.shared.state import AppState
    from storage.models import MemoryJobRow

    doc = _doc(rt, tmp_path)
    rt_off = replace(rt, settings=rt.settings.with_(app_worker=False))
    writer = MemoryWriter(rt_off)
    s = AppState(rt_off, rt_off.settings, writer)
    writer.submit(doc)
    info = rt.library.get_document(doc)
    assert s.memory_label(info).endswith("(queued)")
    with rt.library.engine.begin() as con:
        con.execute(MemoryJobRow.__table__.update().values(
            updated_at=MemoryJobRow.updated_at - UNCLAIMED_S - 1))
    assert "no memory worker takes it" in s.memory_label(info)
    job = writer.jobs.claim(rt.fingerprint, "w", 30)
    writer.jobs.retry(job, "w", "OperationalError: gone", 60)
    assert "retrying" in s.memory_label(info)
