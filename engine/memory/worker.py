"""The memory worker: phase two of ingest (``write_document_memories``) as shared work.

Every process that writes memories is a worker of this kind: ``python -m engine worker`` on its
own (a GPU box), or the app's background thread (app/shared/memory_writer.py). A worker claims one
document's job at a time from the library (storage/jobs.py: row locks that skip claimed rows,
a lease renewed at every write batch), writes the missing memories height by height, each
height stored only while it still holds the job, and marks the job done. A worker killed or
hung stops renewing its lease; once the lease runs out another worker takes the job over and
resumes from the stored heights, so no node is written twice and the result is the one an
uninterrupted run gives.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import Callable, Protocol

from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError

from engine.memory.writer import write_memories
from storage import DocumentNotFound, Library, LeaseLost, MemoryJob, MemoryJobs
from storage.faults import IO_ERROR, UNREACHABLE, Fault, StorageFault, classify
from storage.jobs import MAX_ATTEMPTS

log = logging.getLogger(__name__)

BEAT_EVERY_S = 1.0  # progress reports renew the lease at most this often (each stored height too)
RETRY_S = 5.0  # the first retry's backoff; doubled at each attempt, at most MAX_PAUSE_S
MAX_PAUSE_S = 120.0
# A worker that met a storage fault (a full disk, the database gone: storage/faults.py) gives
# its job back at once (another run resumes it) and waits before its own next claim: its poll
# time, doubled at each fault in a row, at most this long.
MAX_FAULT_PAUSE_S = 30.0
YIELD_POLL_S = 0.2  # how often a worker that yields (``yield_to``) looks again


def transient(e: BaseException) -> bool:
    """A failure that another attempt may not meet: the database unreachable or its
    connection dropped, a timeout, the disk or the network (OSError)."""
    if isinstance(e, (OperationalError, DisconnectionError, TimeoutError, OSError)):
        return True
    return isinstance(e, DBAPIError) and bool(e.connection_invalidated)


def backoff_s(attempts: int) -> float:
    """The pause before attempt ``attempts + 1`` of a job."""
    return min(MAX_PAUSE_S, RETRY_S * 2 ** max(0, attempts - 1))


def _line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"[:300]


class Stopped(Exception):
    """Raised inside the write's progress callback when the worker is asked to stop."""


def holder_name() -> str:
    """This worker's name in the jobs it holds: host, process and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def holder_gone(holder: str | None) -> bool:
    """True when ``holder`` (``holder_name``) was a process of this host that no longer runs:
    its job can be taken over at once, not after its lease (one that could not give its job
    back, the disk being full, and exited)."""
    host, _, rest = (holder or "").partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, under another user
        return False
    return False


def write_document_memories(library: Library, doc_id: int, fingerprint: str, backbone, parts,
                            batches: dict, progress: Callable[[int, int], None] | None = None, *,
                            tree=None, store: Callable[[dict], None] | None = None) -> float:
    """Phase two of one document: write its missing node memories under ``fingerprint``
    (``engine.memory.writer``, H2MT 3.2), storing each tree height as it finishes; resumes an
    interrupted write. Milliseconds spent. ``store``: how a finished height is stored (the
    worker's checks it still holds the document's job); by default straight into the library."""
    if store is None:
        def store(new: dict) -> None:
            library.add_memories(doc_id, new, fingerprint)
    tree = tree if tree is not None else library.get_tree(doc_id)
    known = library.get_memories(doc_id, fingerprint, partial=True)
    if len(known) == len(tree):
        return 0.0
    t0 = time.perf_counter()
    write_memories(tree, backbone, parts, **batches, progress=progress, known=known,
                   on_level=store)
    memory_ms = (time.perf_counter() - t0) * 1e3
    library.set_memory_ms(doc_id, memory_ms)
    return memory_ms


class WriteFn(Protocol):
    """Writes one document's missing memories, reporting ``progress(done, total)`` and storing
    each finished height with ``store(memories)``; milliseconds spent."""

    def __call__(self, doc_id: int, progress: Callable[..., None],
                 store: Callable[[dict], None]) -> float: ...


class MemoryWorker:
    """Claims and writes the library's memory jobs under ``fingerprint`` until stopped.

    The worker writes each document itself (``write_document``: ``write_document_memories``
    with ``backbone``, ``parts`` and the settings' ``batches``); ``write`` replaces that (a
    ``WriteFn``: tests hold a write back or make one fail). ``engine.ingest.memory_worker``
    builds a worker over a runtime. ``lease_s``: the lease renewed at every batch; ``poll_s``:
    the pause of an idle worker between looks for work."""

    def __init__(self, library: Library, fingerprint: str, backbone, parts, *, batches: dict,
                 lease_s: float, poll_s: float, holder: str | None = None,
                 write: WriteFn | None = None):
        self.library = library
        self.fingerprint = fingerprint
        self.backbone, self.parts, self.batches = backbone, parts, batches
        self.jobs = MemoryJobs(library)
        self.holder = holder or holder_name()
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.write: WriteFn = write if write is not None else self.write_document
        self.current: MemoryJob | None = None
        # documents whose job this worker gave back after a storage fault, with the fault (the
        # library shows "memories paused: <cause>" even when the fault kept it from saying so)
        self.paused: dict[int, Fault] = {}
        self.fault: Fault | None = None  # a storage fault met by its last claim
        self.faults_in_a_row = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        # true while this worker should not claim (the app's passage vectors being encoded:
        # engine/passage_worker.py); ``run`` looks again every YIELD_POLL_S
        self.yield_to: Callable[[], bool] | None = None

    def write_document(self, doc_id: int, progress: Callable[..., None],
                       store: Callable[[dict], None]) -> float:
        """Phase two of one document (``write_document_memories``), each height stored by
        ``store``."""
        return write_document_memories(self.library, doc_id, self.fingerprint, self.backbone,
                                       self.parts, self.batches, progress, store=store)

    # -- queueing -------------------------------------------------------------------------------
    def enqueue(self, doc_id: int) -> bool:
        """Queue the document's memories (a job in the library); wakes this worker."""
        queued = self.jobs.enqueue(doc_id, self.fingerprint)
        self._wake.set()
        return queued

    def enqueue_incomplete(self) -> list[int]:
        """Queue every document whose memories are incomplete under the runtime's fingerprint
        and that has no open job (uploads interrupted before they queued, older libraries,
        ``ingest --text-only``)."""
        lib, fp = self.library, self.fingerprint
        docs = lib.list_documents()
        jobs = self.jobs.of_documents([d.id for d in docs], fp)
        queued = []
        for d in docs:
            job = jobs.get(d.id)
            if job is not None and job.state in ("pending", "running", "failed"):
                continue  # a failed job waits for the file to be uploaded again
            try:
                if not lib.memory_progress(d.id, fp).complete and self.enqueue(d.id):
                    queued.append(d.id)
            except DocumentNotFound:
                continue
        if queued:
            log.info("memories to write: %d document(s) queued: %s", len(queued), queued)
        return queued

    # -- working --------------------------------------------------------------------------------
    def run_one(self) -> int | None:
        """Claim one free job and write it; its document id, or None when none was free."""
        # its own holder too: a job it could not give back (the disk full) is never written
        # by it now (one job at a time), so it is taken again at once
        try:
            job = self.jobs.claim(self.fingerprint, self.holder, self.lease_s,
                                  take_over=(self.holder,))
        except Exception as e:
            self.fault = classify(e)  # what the library shows of the memories waiting
            raise
        self.fault = None
        if job is None:
            return None
        self._work(job)
        return job.doc_id

    def write_now(self, doc_id: int, progress: Callable[..., None] | None = None) -> bool:
        """Write one document's memories here and now, under its job's lease like any worker
        (``engine ingest``): its job queued and claimed; one held by a live worker elsewhere is
        waited for (``progress`` is called meanwhile, so an ingest deadline still applies).
        Any failure gives the job back and is raised. True when this call wrote them."""
        self.jobs.enqueue(doc_id, self.fingerprint)
        dead = None
        while True:
            job = self.jobs.claim(self.fingerprint, self.holder, self.lease_s, doc_id=doc_id,
                                  take_over=(self.holder,) if dead is None else (self.holder, dead))
            if job is not None:
                self._work(job, progress, give_back=True)
                return True
            held = self.jobs.get(doc_id, self.fingerprint)
            if held is None or held.state in ("done", "failed"):
                return False
            if held.state == "running" and held.holder != dead and holder_gone(held.holder):
                dead = held.holder  # its process is gone: taken over now, not after its lease
                continue
            if progress is not None:
                progress(held.done, held.total, stage="memories (another worker)")
            time.sleep(min(self.poll_s, 1.0))

    def _work(self, job: MemoryJob, report: Callable[..., None] | None = None, *,
              give_back: bool = False) -> None:
        """Write ``job``'s memories while holding it. A transient failure (the database, the
        disk) gives it back to be retried after a backoff; another failure fails it (or, with
        ``give_back``, gives it back and is raised); a stop (``stop``, Ctrl-C, SIGTERM) gives it
        back with its attempts reset."""
        self.current = job
        if job.attempts > 1:
            log.info("memories #%d: claim %d (taken over or retried)", job.doc_id, job.attempts)
        last = [0.0]

        def progress(done: int, total: int, *, stage: str = "memories") -> None:
            if self._stop.is_set():
                raise Stopped()
            if report is not None:
                report(done, total, stage=stage)
            now = time.monotonic()
            if now - last[0] >= BEAT_EVERY_S or done >= total:
                last[0] = now
                self.jobs.beat(job, self.holder, self.lease_s, done, total)
                log.info("memories #%d %d/%d", job.doc_id, done, total)

        def store(new: dict) -> None:
            self.jobs.add_memories(job, self.holder, self.lease_s, new)

        self.paused.pop(job.doc_id, None)  # claimed again: no longer paused
        try:
            self.write(job.doc_id, progress, store)
        except (LeaseLost, DocumentNotFound):
            log.info("memories #%d: no longer this worker's (taken over or deleted)", job.doc_id)
        except (Stopped, KeyboardInterrupt, SystemExit) as e:
            self._settle(lambda: self.jobs.release(job, self.holder))
            if not isinstance(e, Stopped):
                raise
        except Exception as e:  # noqa: BLE001 - one document failing must not stop the worker
            fault = classify(e)
            if fault is not None:  # the storage's fault, not the job's: given back at once
                self.paused[job.doc_id] = fault
                self.faults_in_a_row += 1
                log.warning("memories #%d paused: %s", job.doc_id, fault.cause)
                counted = fault.kind in (UNREACHABLE, IO_ERROR)  # perhaps the job's doing
                self._settle(lambda: self.jobs.pause(job, self.holder, fault.cause,
                                                     counted=counted))
                if give_back:
                    raise StorageFault(fault, "Writing the memories") from e
                return
            if give_back:
                self._settle(lambda: self.jobs.release(job, self.holder))
                raise
            if transient(e) and job.attempts < MAX_ATTEMPTS:
                delay = backoff_s(job.attempts)
                log.warning("memories #%d: %s; retried in %.0f s (attempt %d of %d)",
                            job.doc_id, _line(e), delay, job.attempts, MAX_ATTEMPTS)
                self._settle(lambda: self.jobs.retry(job, self.holder, _line(e), delay))
            else:
                log.exception("writing the memories of document %d failed", job.doc_id)
                self._settle(lambda: self.jobs.fail(job, self.holder, _line(e)))
        else:
            if self._settle(lambda: self.jobs.finish(job, self.holder)):
                log.info("memories #%d done", job.doc_id)
        finally:
            self.current = None

    @staticmethod
    def _settle(change: Callable[[], bool]) -> bool:
        """A job's end state written; a database that fails here is logged (the lease runs out
        and another claim retries the job), never raised into the worker's loop."""
        try:
            return change()
        except Exception as e:  # noqa: BLE001
            fault = classify(e)
            if fault is None:
                log.exception("recording a memory job's state failed; its lease will run out")
            else:  # one line: the cause is known
                log.warning("recording a memory job's state failed (%s); another run takes it "
                            "over once this process has exited or its lease has run out",
                            fault.cause)
            return False

    def run(self, *, until_idle: bool = False) -> None:
        """Work until ``stop``; ``until_idle``: return once no job under the fingerprint is
        pending or running anywhere (a running one held elsewhere may still be abandoned).
        A database error (down, restarting, a dropped connection) is logged and waited out
        with a growing pause: the loop goes on."""
        failures = 0
        while not self._stop.is_set():
            if self.yield_to is not None and self.yield_to():
                self._stop.wait(YIELD_POLL_S)
                continue
            try:
                faults = self.faults_in_a_row
                if self.run_one() is not None:
                    failures = 0
                    if self.faults_in_a_row == faults:
                        self.faults_in_a_row = 0
                        continue
                    # a storage fault: the job is given back; this worker waits a while
                    self._wake.wait(min(MAX_FAULT_PAUSE_S,
                                        self.poll_s * 2 ** min(self.faults_in_a_row, 8)))
                    self._wake.clear()
                    continue
                if until_idle and self.jobs.open_count(self.fingerprint) == 0:
                    return
                failures = 0
                pause = self.poll_s
            except Exception as e:  # noqa: BLE001 - the library unreachable: wait, go on
                failures += 1
                pause = min(MAX_PAUSE_S, self.poll_s * 2 ** failures)
                log.warning("memory worker: the library failed (%s); trying again in %.0f s",
                            _line(e), pause)
            self._wake.wait(pause)
            self._wake.clear()

    def stop(self) -> None:
        """Stop after the current batch; the job being written goes back to pending."""
        self._stop.set()
        self._wake.set()
