"""Phase two of ingest in the background: the app's memory worker (engine/memory/worker.py) in a
daemon thread, a worker like ``manual-explorer-engine worker``; any number of them on one library.

Uploads queue their document as a job in the library; whichever worker claims it writes it (this
process's thread, another replica's, or a worker on its own machine), one document at a time per
worker and never one document by two workers. What the library shows ("memories n/N", queued,
failed) is read from the library's jobs, so every replica shows the same. At start, documents
whose memories are incomplete are queued again, and an interrupted write resumes where it
stopped (one tree height is stored at a time). With ``H2MT_APP_WORKER=0`` the app queues jobs
and shows their progress but writes nothing itself (replicas beside dedicated workers).

Before the memories, a document's passage vectors (what the quote reads) are encoded by this
process's ``PassageWorker`` (engine/passage_worker.py; ``passages``), even with
``H2MT_APP_WORKER=0``: queued by ``submit``, resumed at start, dropped by ``cancel``; the memory
thread claims no job while it works.
"""
from __future__ import annotations

import logging
import threading
import time

from engine.ingest import memory_worker as runtime_worker
from engine.memory.worker import WriteFn, holder_gone
from engine.passage_worker import PassageWorker
from engine.runtime import Runtime
from storage import MemoryJobs
from storage.faults import classify
from storage.jobs import PAUSED

log = logging.getLogger(__name__)

IDLE_POLL_S = 0.2  # how often ``wait_idle`` looks at the library's open jobs
# A job waiting this long while no worker writes anything under the runtime's fingerprint is
# one nobody takes (no worker running, or only workers with other model settings).
UNCLAIMED_S = 60.0


class MemoryWriter:
    """The app's side of the memory jobs: queue (``submit``), show (``state``), drop before a
    deletion (``cancel``), and, unless the settings turn it off, one worker thread (the
    engine's worker, which writes each document itself; ``write``: its ``WriteFn`` instead)."""

    def __init__(self, rt: Runtime, write: WriteFn | None = None):
        self.rt = rt
        self.jobs = MemoryJobs(rt.library)
        self.enabled = rt.settings.app_worker
        self.worker = runtime_worker(rt, write=write)
        # the passage vectors the quote reads (engine/passage_worker.py): encoded first, the
        # memory thread waiting meanwhile (two encoders on two cores slow both)
        self.passages = PassageWorker(rt)
        self.worker.yield_to = self.passages.busy
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.causes: dict[int, str] = {}  # doc id -> why its memories are paused ("paused")

    def _start(self) -> None:
        with self._lock:
            if self.enabled and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self.worker.run, name="memory-worker",
                                                daemon=True)
                self._thread.start()

    def submit(self, doc_id: int) -> bool:
        """Queue the document's memories unless they are already queued or being written (by
        any worker); True if queued now."""
        try:
            self.passages.submit(doc_id)
        except Exception as e:  # noqa: BLE001 - asks encode what they need meanwhile
            log.warning("passage vectors of #%d not queued: %s", doc_id, e)
        queued = self.worker.enqueue(doc_id)
        self._start()
        return queued

    def resume_incomplete(self) -> list[int]:
        """Queue every document whose memories are incomplete under the runtime's fingerprint
        (an upload whose phase two was interrupted by a crash or a restart), and start."""
        try:
            queued = self.worker.enqueue_incomplete()
        except Exception as e:  # noqa: BLE001 - a storage fault: the app starts all the same
            if (fault := classify(e)) is None:
                raise
            log.warning("memories to resume were not queued: %s (an upload queues its own)",
                        fault.cause)
            self.worker.fault, queued = fault, []
        self.passages.resume_incomplete()
        self._start()
        return queued

    def cancel(self, doc_id: int) -> None:
        """Drop the document's job before it is deleted: whichever worker holds it stores
        nothing more (its next store or beat finds no job) and goes on to other work."""
        self.passages.cancel(doc_id)
        self.jobs.cancel(doc_id)

    def state(self, doc_id: int) -> tuple[str, tuple[int, int] | None]:
        """From the library: ("writing", (done, total) its holder last reported) |
        ("retrying", None) (a write failed; tried again after a pause) | ("queued", None)
        (waiting, or held by a worker that stopped beating) | ("unclaimed", None) (waiting
        ``UNCLAIMED_S`` while no worker writes anything under this fingerprint: nobody can
        take it) | ("paused", None) (given back after a storage fault: a full disk, the
        database gone; ``causes[doc_id]`` says which) | ("failed", None) | ("", None)."""
        # a fault this process's worker met (perhaps unable to record it in the library)
        fault = self.worker.paused.get(doc_id) or (self.worker.fault if self.enabled else None)
        job = self.jobs.get(doc_id, self.rt.fingerprint)
        if job is None or job.state == "done":
            return "", None
        if job.state == "failed":
            return "failed", None
        held_here = job.holder in (None, self.worker.holder) or holder_gone(job.holder)
        if fault is not None and job.state in ("pending", "running") and held_here:
            self.causes[doc_id] = fault.cause
            return "paused", None
        if job.live():
            return "writing", (job.done, job.total)
        if job.state == "pending" and (job.error or "").startswith(PAUSED):
            self.causes[doc_id] = job.error[len(PAUSED):]
            return "paused", None
        if job.backing_off():
            return "retrying", None
        if (time.time() - job.updated_at > UNCLAIMED_S
                and self.jobs.live_count(self.rt.fingerprint) == 0):
            return "unclaimed", None
        return "queued", None

    def busy(self) -> bool:
        """Any document's memories queued or being written, by any worker on the library."""
        return self.jobs.open_count(self.rt.fingerprint) > 0

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no job is queued or being written (True), or ``timeout`` passes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.busy():
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(IDLE_POLL_S)
        return True

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the worker thread after its current batch and wait for it (``timeout`` s): a
        process that exits while the thread is inside the model aborts ("terminate called
        without an active exception", exit 134)."""
        self.worker.stop()
        self.passages.stop(timeout)
        if self._thread is not None:
            self._thread.join(timeout)


def stop_memory_writer(rt: Runtime, timeout: float = 30.0) -> None:
    """Stop the runtime's memory writer, if one was started (an app shutting down)."""
    writer = rt.cache.get("memory_writer")
    if writer is not None:
        writer.stop(timeout)


def memory_writer(rt: Runtime) -> MemoryWriter:
    """The runtime's one background memory writer (created on first use): two apps built over
    the same runtime share it, so one process never runs two writer threads."""
    writer = rt.cache.get("memory_writer")
    if writer is None:
        writer = rt.cache["memory_writer"] = MemoryWriter(rt)
    return writer
