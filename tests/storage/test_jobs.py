"""Memory jobs (storage/jobs.py): queued once, claimed by one worker, rows being claimed skipped
(PostgreSQL), a silent holder's job taken over after its lease, a holder that lost its job
stores nothing, a deleted document's job gone with it, and a library made before the jobs
table opens and gets it. On SQLite, and on PostgreSQL when H2MT_TEST_PG_URL is set."""
from __future__ import annotations

import time

import pytest
import torch
from sqlalchemy import func, select, text

from storage import DocumentMeta, DocumentNotFound, LeaseLost, Library, MemoryJobs
from storage.jobs import MAX_ATTEMPTS
from storage.models import Base, MemoryJobRow, MemoryRow
from tests.support.library import PG_URL, library, sample_tree  # noqa: F401 (fixture)

FP = "fp-test"


def _doc(lib: Library, name: str = "a") -> tuple[int, list[int]]:
    tree = sample_tree()
    doc = lib.add_document(DocumentMeta(title=name, file_name=f"{name}.pdf", sha256=name * 8),
                           tree)
    return doc, sorted(tree.graph.nodes)


def _vectors(ids) -> dict[int, torch.Tensor]:
    return {i: torch.full((4,), float(i)) for i in ids}


def test_queued_once_claimed_by_one_worker(library):
    jobs = MemoryJobs(library)
    doc, nodes = _doc(library)
    assert jobs.enqueue(doc, FP) and not jobs.enqueue(doc, FP)
    with pytest.raises(DocumentNotFound):
        jobs.enqueue(doc + 100, FP)
    job = jobs.claim(FP, "w1", lease_s=60)
    assert job is not None and (job.doc_id, job.state, job.holder, job.attempts) == (
        doc, "running", "w1", 1)
    assert job.total == len(nodes)
    assert jobs.claim(FP, "w2", lease_s=60) is None  # held, lease alive
    assert jobs.claim("other-fp", "w2", lease_s=60) is None
    assert not jobs.enqueue(doc, FP)  # running: not queued twice
    jobs.beat(job, "w1", 60, 3, len(nodes))
    assert jobs.get(doc, FP).done == 3
    jobs.add_memories(job, "w1", 60, _vectors(nodes[:2]))
    assert jobs.finish(job, "w1")
    assert jobs.get(doc, FP).state == "done" and jobs.open_count(FP) == 0
    assert jobs.enqueue(doc, FP)  # an upload of the same file queues a done job again


def test_silent_holder_is_taken_over_and_stores_nothing_after(library):
    jobs = MemoryJobs(library)
    doc, nodes = _doc(library)
    jobs.enqueue(doc, FP)
    first = jobs.claim(FP, "w1", lease_s=0.2)
    jobs.add_memories(first, "w1", 0.2, _vectors(nodes[:2]))  # one height stored
    time.sleep(0.3)  # w1 stops beating (killed or hung)
    second = jobs.claim(FP, "w2", lease_s=60)
    assert second is not None and second.holder == "w2" and second.attempts == 2
    with pytest.raises(LeaseLost):
        jobs.beat(first, "w1", 60, 4, len(nodes))
    with pytest.raises(LeaseLost):  # w1 wakes up: its next height is not stored
        jobs.add_memories(first, "w1", 60, _vectors(nodes[2:4]))
    assert not jobs.finish(first, "w1")
    with library._sessions() as s:
        stored = sorted(s.scalars(select(MemoryRow.node_id).where(MemoryRow.doc_id == doc)))
    assert stored == nodes[:2]
    jobs.add_memories(second, "w2", 60, _vectors(nodes[2:]))
    assert jobs.finish(second, "w2") and jobs.get(doc, FP).state == "done"


def test_a_job_abandoned_too_often_fails(library):
    jobs = MemoryJobs(library)
    doc, _ = _doc(library)
    jobs.enqueue(doc, FP)
    for i in range(MAX_ATTEMPTS):
        assert jobs.claim(FP, f"w{i}", lease_s=0.01) is not None
        time.sleep(0.02)
    assert jobs.claim(FP, "last", lease_s=60) is None
    job = jobs.get(doc, FP)
    assert job.state == "failed" and "gave up after" in job.error and "killed or hung" in job.error


def test_deleting_the_document_ends_its_job(library):
    jobs = MemoryJobs(library)
    doc, nodes = _doc(library)
    jobs.enqueue(doc, FP)
    job = jobs.claim(FP, "w1", lease_s=60)
    library.delete_document(doc)
    with pytest.raises(LeaseLost):
        jobs.add_memories(job, "w1", 60, _vectors(nodes[:2]))
    with library._sessions() as s:
        assert s.scalar(select(func.count()).select_from(MemoryJobRow)) == 0
        assert s.scalar(select(func.count()).select_from(MemoryRow)) == 0


def test_rows_being_claimed_are_skipped_not_waited_for(library):
    if library.engine.dialect.name != "postgresql":
        pytest.skip("row locks that skip are PostgreSQL's (SQLite has one writer at a time)")
    jobs = MemoryJobs(library)
    a, _ = _doc(library, "a")
    b, _ = _doc(library, "b")
    jobs.enqueue(a, FP)
    jobs.enqueue(b, FP)
    with library.engine.connect() as other:  # another worker in the middle of claiming `a`
        tx = other.begin()
        other.execute(select(MemoryJobRow).where(MemoryJobRow.doc_id == a).with_for_update())
        t0 = time.monotonic()
        job = jobs.claim(FP, "w2", lease_s=60)
        assert time.monotonic() - t0 < 2.0
        assert job is not None and job.doc_id == b
        assert jobs.claim(FP, "w3", lease_s=60) is None  # `a` still locked: skipped
        tx.rollback()
    assert jobs.claim(FP, "w3", lease_s=60).doc_id == a


def test_a_library_from_before_the_jobs_table_opens(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    lib = Library(url)
    doc, _ = _doc(lib)
    MemoryJobRow.__table__.drop(lib.engine)  # as an older version left it
    lib.close()
    lib = Library(url)
    assert [d.id for d in lib.list_documents()] == [doc]
    assert MemoryJobs(lib).enqueue(doc, FP)
    with lib.engine.connect() as con:
        assert con.execute(text("SELECT count(*) FROM memory_jobs")).scalar_one() == 1
    lib.close()
    assert Base.metadata.tables["memory_jobs"] is MemoryJobRow.__table__

