"""The memory worker (engine/memory/worker.py, built by engine.ingest.memory_worker) in one
process, on a SQLite library with the tiny backbone: two workers share the queued documents and
write each node once, a failing document is marked failed while the worker goes on, a stopped
worker gives its job back. The multi-process version (replicas, kill -9, PostgreSQL) is
tests/test_replicas.py."""
from __future__ import annotations

import threading

import pytest

from engine.settings import Settings
from tests.support.phase_two import memory_inserts
from tests.support.runtime import tagged_manual


@pytest.fixture
def rt(tmp_path, tiny_backbone, tiny_parts):
    from engine.runtime import Runtime
    from storage import Library

    settings = Settings(data_dir=tmp_path, dense_encoder="none", write_batch_nodes=2,
                        worker_poll_s=0.05, job_lease_s=30)
    runtime = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    yield runtime
    runtime.library.close()


def _docs(rt, tmp_path, n: int) -> list[int]:
    from engine.ingest import ingest_file

    out = []
    for i in range(n):
        md = tmp_path / f"m{i}.md"
        md.write_text(tagged_manual(f"tag{i}") * 2)
        out.append(ingest_file(md, rt, memories=False).doc_id)
    return out


def test_two_workers_share_the_documents_and_write_each_node_once(rt, tmp_path):
    from engine.ingest import memory_worker

    docs = _docs(rt, tmp_path, 4)
    workers = [memory_worker(rt, holder=f"w{i}") for i in range(2)]
    assert workers[0].enqueue_incomplete() == docs
    assert workers[1].enqueue_incomplete() == []  # already queued
    written: dict[str, list[int]] = {w.holder: [] for w in workers}

    def run(w):
        while (d := w.run_one()) is not None:
            written[w.holder].append(d)

    with memory_inserts(rt.library.engine) as inserted:
        threads = [threading.Thread(target=run, args=(w,)) for w in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert sorted(written["w0"] + written["w1"]) == docs
    total = sum(rt.library.get_document(d).n_nodes for d in docs)
    assert len(inserted) == total  # every node of every document inserted once
    for d in docs:
        assert rt.library.memory_progress(d, rt.fingerprint).complete
        job = workers[0].jobs.get(d, rt.fingerprint)
        assert job.state == "done" and job.done == job.total and job.holder is None


def test_a_failing_document_fails_alone_and_a_stopped_worker_gives_its_job_back(rt, tmp_path):
    from engine.ingest import memory_worker

    bad, good = _docs(rt, tmp_path, 2)

    def write(doc_id, progress, store):
        if doc_id == bad:
            raise RuntimeError("disk full")
        return w.write_document(doc_id, progress, store)

    w = memory_worker(rt, write=write)
    w.enqueue(bad)
    w.enqueue(good)
    w.run(until_idle=True)
    failed = w.jobs.get(bad, rt.fingerprint)
    assert failed.state == "failed" and "disk full" in failed.error
    assert rt.library.memory_progress(good, rt.fingerprint).complete
    assert w.enqueue(bad)  # an upload of the same file queues it again

    def stop_at_first_batch(doc_id, progress, store):
        stopping.stop()
        return stopping.write_document(doc_id, progress, store)

    stopping = memory_worker(rt, write=stop_at_first_batch)
    assert stopping.run_one() == bad
    job = w.jobs.get(bad, rt.fingerprint)
    assert job.state == "pending" and job.holder is None  # given back: another takes it at once
    other = memory_worker(rt)
    other.run(until_idle=True)
    assert rt.library.memory_progress(bad, rt.fingerprint).complete
