"""The passage vectors of uploaded manuals, encoded in the background.

An upload stores the document (tree and routing evidence, phase one) and is askable at once;
a big one (``Settings.background_evidence_nodes``) with its lexical evidence only, routed by
its words until the dense vectors of its nodes are stored here first
(``engine.ingest.store_evidence_vectors``, one transaction). Then the vectors of its passage
texts, which the quote stage reads (``engine.ingest.
store_unit_vectors``), are encoded here, one document at a time in a daemon thread, and
stored a chunk at a time (``unit_vectors.STORE_EVERY`` texts). They are stored by the digest of
their text, so the work resumes after a restart from what is stored (``resume_incomplete``
queues every document; one whose texts are all stored costs a lookup), and an ask meanwhile
reads the stored ones and encodes only its own candidates not stored yet (``StoredEncoder``,
which stores them too), ahead of this worker's next batch (``SentenceEncoder.in_background``).
``engine ingest`` still encodes them in the same call.

Progress lives in this process (``state``: texts stored and total of each queued document);
what is stored lives in the library. Several app processes on one library may encode the same
document's texts at the same time: the library keeps the first copy of each (by digest).
"""
from __future__ import annotations

import contextlib
import logging
import threading
from storage import DocumentNotFound
from storage.faults import classify

log = logging.getLogger(__name__)


class PassageWorker:
    """Encodes the queued documents' passage vectors in a daemon thread (started on the first
    ``submit``)."""

    def __init__(self, rt):
        self.rt = rt
        self._cond = threading.Condition()
        self._queue: list[int] = []
        self._current: int | None = None
        self._progress: dict[int, tuple[int, int]] = {}  # doc id -> (stored, total)
        self._words_only: set[int] = set()  # queued docs whose evidence waits for its vectors
        self.errors: dict[int, str] = {}  # doc id -> why its vectors were not finished
        self._cancelled: set[int] = set()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # -- queueing -------------------------------------------------------------------------------
    def submit(self, doc_id: int) -> tuple[int, int]:
        """Queue the document (unless queued or being encoded); (stored, total) of its texts to
        encode now (its nodes' evidence vectors if pending, then its passage texts), from the
        library. (n, n): nothing to encode, nothing queued."""
        from engine.ingest import pending_evidence_vectors, pending_unit_vectors

        nodes = pending_evidence_vectors(doc_id, self.rt)
        done, total = pending_unit_vectors(doc_id, self.rt)
        total += nodes
        if done < total:
            with self._cond:
                self.errors.pop(doc_id, None)
                if nodes:
                    self._words_only.add(doc_id)
                if doc_id not in self._queue and doc_id != self._current:
                    self._queue.append(doc_id)
                    self._progress[doc_id] = (done, total)
                self._cond.notify_all()
            self._start()
        return done, total

    def resume_incomplete(self) -> None:
        """Queue every document of the library (the thread skips those with every text stored):
        what a restart interrupted is finished."""
        try:
            ids = [d.id for d in self.rt.library.list_documents()]
        except Exception as e:  # noqa: BLE001 - the library unreachable: an upload queues its own
            if classify(e) is None:  # a bug is raised
                raise
            log.warning("passage vectors to resume were not queued: %s", e)
            return
        with self._cond:
            for d in ids:
                if d not in self._queue and d != self._current:
                    self._queue.append(d)
            self._cond.notify_all()
        if ids:
            self._start()

    def cancel(self, doc_id: int) -> None:
        """Forget the document (it is being deleted); one being encoded stores nothing more
        (the library adds no vectors to a deleted document)."""
        with self._cond:
            if doc_id in self._queue:
                self._queue.remove(doc_id)
            if doc_id == self._current:
                self._cancelled.add(doc_id)
            self._progress.pop(doc_id, None)
            self._words_only.discard(doc_id)
            self._cond.notify_all()

    # -- reading --------------------------------------------------------------------------------
    def state(self, doc_id: int) -> tuple[int, int] | None:
        """(stored, total) of a document whose passage vectors are queued or being encoded by
        this process; None otherwise."""
        with self._cond:
            return self._progress.get(doc_id)

    def words_only(self, doc_id: int) -> bool:
        """Whether the document, queued here, is still routed by its words only (its nodes'
        dense vectors not stored yet)."""
        with self._cond:
            return doc_id in self._words_only

    def busy(self) -> bool:
        with self._cond:
            return bool(self._queue) or self._current is not None

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is queued or being encoded (True), or ``timeout`` passes."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and self._current is None,
                                       timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the current chunk (what it stored stays) and wait for the thread."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- working --------------------------------------------------------------------------------
    def _start(self) -> None:
        with self._cond:
            if self._stop.is_set() or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(target=self._run, name="passage-worker",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._stop.is_set())
                if self._stop.is_set():
                    return
                doc_id = self._current = self._queue.pop(0)
            try:
                self._encode(doc_id)
            finally:
                with self._cond:
                    self._current = None
                    self._cancelled.discard(doc_id)
                    self._progress.pop(doc_id, None)
                    self._words_only.discard(doc_id)
                    self._cond.notify_all()

    def _vector_keys(self, doc_id: int) -> list:
        """The runtime cache's keys of the document's stored vectors (``known_vectors``)."""
        return [k for k in list(self.rt.cache)
                if isinstance(k, tuple) and k[:2] == ("unit_vectors", doc_id)]

    def _encode(self, doc_id: int) -> None:
        from engine.ingest import (pending_evidence_vectors, pending_unit_vectors,
                                   store_evidence_vectors, store_unit_vectors)

        def progress(done: int, total: int, *, stage: str) -> None:
            with self._cond:
                if doc_id == self._current and doc_id not in self._cancelled:
                    self._progress[doc_id] = (done + base[0], total + base[0] + later[0])

        base, later = [0], [0]
        try:
            cached = set(self._vector_keys(doc_id))
            nodes = pending_evidence_vectors(doc_id, self.rt)
            stored, total = pending_unit_vectors(doc_id, self.rt)
            if not nodes and stored >= total:  # (a restart's look at every document)
                for key in set(self._vector_keys(doc_id)) - cached:  # nothing kept in memory
                    self.rt.cache.pop(key, None)
                return
            with self._cond:
                if doc_id in self._cancelled:
                    return
                self._progress[doc_id] = (stored, total + nodes)
                if nodes:  # found by its words until they are stored (queued by a restart too)
                    self._words_only.add(doc_id)
            background = getattr(self.rt.encoder, "in_background", None)  # asks go first
            with background() if background is not None else contextlib.nullcontext():
                if nodes:
                    base[0], later[0] = stored, total - stored
                    store_evidence_vectors(doc_id, self.rt, progress)
                    with self._cond:
                        self._words_only.discard(doc_id)
                    log.info("evidence vectors of #%d: %d nodes encoded", doc_id, nodes)
                    stored, total = pending_unit_vectors(doc_id, self.rt)  # asks stored some
                base[0], later[0] = stored + nodes, 0
                added = store_unit_vectors(
                    doc_id, self.rt, progress,
                    stop=lambda: self._stop.is_set() or doc_id in self._cancelled)
            log.info("passage vectors of #%d: %d encoded", doc_id, added)
        except DocumentNotFound:
            log.info("passage vectors of #%d: the document was deleted", doc_id)
        except Exception as e:  # noqa: BLE001 - one document failing must not stop the rest
            log.exception("passage vectors of #%d failed (asks encode what they need)", doc_id)
            with self._cond:
                self.errors[doc_id] = f"{type(e).__name__}: {e}"[:300]
