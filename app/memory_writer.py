"""Phase two of ingest in the background (engine/ingest.py, write_document_memories): one writer
thread per runtime writes the node memories of uploaded documents, one document at a time, so no
document ever has two writers in one process. The library shows its progress ("memories n/N");
documents whose memories are incomplete are queued again at start, and an interrupted write
resumes where it stopped (one tree height is stored at a time)."""
from __future__ import annotations

import logging
import queue
import threading

from engine.ingest import write_document_memories
from engine.runtime import Runtime
from storage.errors import DocumentNotFound

log = logging.getLogger(__name__)


class _Cancelled(Exception):
    """Raised inside the memory writer's progress callback to stop writing a deleted document."""


class MemoryWriter:
    """Phase two of ingest in the background: one daemon thread takes document ids from a queue
    and writes their node memories (``write_document_memories``: resumable, one tree height
    stored at a time), one document at a time. A document is queued at most once; ``cancel``
    stops the write of a document that is about to be deleted (checked between batches)."""

    def __init__(self, rt: Runtime, write=write_document_memories):
        self.rt = rt
        self._write = write
        self._queue: queue.Queue[int] = queue.Queue()
        self._cond = threading.Condition()
        self._waiting: set[int] = set()  # queued, not started
        self._current: int | None = None
        self._live: tuple[int, int] | None = None  # (done, total) of the current document
        self._cancel: int | None = None
        self._failed: dict[int, str] = {}
        self._thread: threading.Thread | None = None

    def submit(self, doc_id: int) -> bool:
        """Queue ``doc_id`` unless it is already waiting or being written; True if queued."""
        with self._cond:
            if doc_id in self._waiting or doc_id == self._current:
                return False
            self._waiting.add(doc_id)
            self._failed.pop(doc_id, None)
            self._queue.put(doc_id)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="memory-writer",
                                                daemon=True)
                self._thread.start()
            return True

    def resume_incomplete(self) -> list[int]:
        """Queue every document whose memories are incomplete under the runtime's fingerprint
        (an upload whose phase two was interrupted by a crash or a restart)."""
        lib, fp = self.rt.library, self.rt.fingerprint
        queued = []
        for d in lib.list_documents():
            try:
                incomplete = not lib.memory_progress(d.id, fp).complete
            except DocumentNotFound:
                continue
            if incomplete and self.submit(d.id):
                queued.append(d.id)
        if queued:
            log.info("writing the missing memories of %d document(s) in the background: %s",
                     len(queued), queued)
        return queued

    def cancel(self, doc_id: int, wait_s: float = 120.0) -> None:
        """Forget ``doc_id``; if it is being written, stop at the next batch and wait for that."""
        with self._cond:
            self._waiting.discard(doc_id)
            self._failed.pop(doc_id, None)
            if self._current != doc_id:
                return
            self._cancel = doc_id
            self._cond.wait_for(lambda: self._current != doc_id, timeout=wait_s)

    def state(self, doc_id: int) -> tuple[str, tuple[int, int] | None]:
        """("writing", (done, total) so far) | ("queued", None) | ("failed", None) | ("", None)."""
        with self._cond:
            if self._current == doc_id:
                return "writing", self._live
            if doc_id in self._waiting:
                return "queued", None
            if doc_id in self._failed:
                return "failed", None
            return "", None

    def failure(self, doc_id: int) -> str | None:
        with self._cond:
            return self._failed.get(doc_id)

    def busy(self) -> bool:
        with self._cond:
            return self._current is not None or bool(self._waiting)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is queued or being written (True), or ``timeout`` passes."""
        with self._cond:
            return self._cond.wait_for(lambda: self._current is None and not self._waiting,
                                       timeout=timeout)

    def _progress(self, done: int, total: int, *, stage: str = "memories") -> None:
        with self._cond:
            if self._cancel is not None and self._cancel == self._current:
                raise _Cancelled()
            self._live = (done, total)

    def _run(self) -> None:
        while True:
            doc_id = self._queue.get()
            with self._cond:
                if doc_id not in self._waiting:  # cancelled (deleted) while it waited
                    continue
                self._waiting.discard(doc_id)
                self._current, self._live, self._cancel = doc_id, None, None
            try:
                self._write(doc_id, self.rt, self._progress)
            except (_Cancelled, DocumentNotFound):
                pass  # deleted meanwhile: nothing left to write
            except Exception as e:  # noqa: BLE001 - keep the thread alive; the library says it
                log.exception("writing the memories of document %s failed", doc_id)
                with self._cond:
                    self._failed[doc_id] = f"{type(e).__name__}: {e}"[:200]
            finally:
                with self._cond:
                    self._current, self._live, self._cancel = None, None, None
                    self._cond.notify_all()


def memory_writer(rt: Runtime) -> MemoryWriter:
    """The runtime's one background memory writer (created on first use): two apps built over
    the same runtime share it, so a document never gets two writers in one process."""
    writer = rt.cache.get("memory_writer")
    if writer is None:
        writer = rt.cache["memory_writer"] = MemoryWriter(rt)
    return writer
