"""Memory-writing jobs: phase two of ingest as work shared by every process on one library.

One job per (document, fingerprint) in ``memory_jobs`` (storage.models.MemoryJobRow). A worker
``claim``s a pending job, or a running one whose holder's lease has run out (killed or hung),
with a row lock that skips rows other workers hold (PostgreSQL's ``FOR UPDATE SKIP LOCKED``;
SQLite has no row locks and one writer at a time, so its claim is the conditional UPDATE alone).
The holder renews its lease as it writes (``beat``) and stores each finished tree height through
``add_memories``, which first renews the lease *as the holder*: a worker whose job was taken
over or whose document was deleted stores nothing more (LeaseLost), so no node is written by two
workers. Leases are wall-clock seconds since the epoch: the machines of one deployment need
synchronised clocks (NTP), and a lease a few times longer than one write batch.

A failed attempt the worker judges transient (a database that broke off, a full disk) is
``retry``'d: the job is pending again, but not before a backoff time (kept in ``lease_until``
of a pending job), and its attempts count on; past ``MAX_ATTEMPTS`` it fails. A worker that
stops (Ctrl-C, SIGTERM) ``release``s its job with its attempts reset: stopping is no failure.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Mapping

from sqlalchemy import and_, delete, func, literal, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from storage.errors import DocumentNotFound, StorageError
from storage.memory_store import insert_memories
from storage.models import DocumentRow, MemoryJobRow, MemoryRow

if TYPE_CHECKING:
    import torch

    from storage.library import Library

MAX_ATTEMPTS = 5  # claims of one job (take-overs included) before it is marked failed
PAUSED = "paused: "  # the error of a job given back after a storage fault, before its cause
STATES = ("pending", "running", "done", "failed")


class LeaseLost(StorageError):
    """The job is no longer this worker's: taken over after its lease ran out, or its document
    was deleted. The worker stops writing it (what it stored before stays: whole heights)."""

    def __init__(self, doc_id: int, holder: str):
        super().__init__(f"the memory job of document {doc_id} is no longer held by {holder}")
        self.doc_id = doc_id


@dataclass(frozen=True)
class MemoryJob:
    """One job as read from the library."""

    doc_id: int
    fingerprint: str
    state: str  # pending | running | done | failed
    holder: str | None
    lease_until: float | None
    done: int
    total: int
    attempts: int
    error: str | None
    updated_at: float = 0.0

    def live(self, now: float | None = None) -> bool:
        """Running under a lease that has not run out."""
        now = time.time() if now is None else now
        return self.state == "running" and (self.lease_until or 0.0) >= now

    def backing_off(self, now: float | None = None) -> float:
        """Seconds until a retried job may be claimed again (0: now, or not retried)."""
        now = time.time() if now is None else now
        if self.state != "pending" or self.lease_until is None:
            return 0.0
        return max(0.0, self.lease_until - now)


def _job(r: MemoryJobRow) -> MemoryJob:
    return MemoryJob(doc_id=r.doc_id, fingerprint=r.fingerprint, state=r.state, holder=r.holder,
                     lease_until=r.lease_until, done=r.done, total=r.total, attempts=r.attempts,
                     error=r.error, updated_at=r.updated_at)


class MemoryJobs:
    """The memory jobs of ``library`` (same engine and write lock)."""

    def __init__(self, library: Library):
        self.lib = library

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Session]:
        """A write transaction on the library (under its per-process write lock on SQLite)."""
        with self.lib._writing(), self.lib._sessions() as s, s.begin():
            yield s

    # -- queueing -------------------------------------------------------------------------------
    def enqueue(self, doc_id: int, fingerprint: str) -> bool:
        """Queue the writing of the document's memories under ``fingerprint``: a new pending
        job, or a done or failed one made pending again (an upload of the same file). False
        when it is already pending or running. DocumentNotFound when there is no document."""
        now = time.time()
        try:
            with self._tx() as s:
                doc = s.get(DocumentRow, doc_id)
                if doc is None:
                    raise DocumentNotFound(doc_id)
                row = s.get(MemoryJobRow, (doc_id, fingerprint))
                if row is None:
                    s.add(MemoryJobRow(doc_id=doc_id, fingerprint=fingerprint, state="pending",
                                       done=0, total=doc.n_nodes, attempts=0, updated_at=now))
                    return True
                if row.state in ("pending", "running"):
                    return False
                row.state, row.holder, row.lease_until = "pending", None, None
                row.attempts, row.error, row.updated_at = 0, None, now
                return True
        except IntegrityError:  # another process queued it at the same moment (or it was deleted)
            return False

    def cancel(self, doc_id: int) -> int:
        """Drop the document's jobs (before deleting it): its holder stops at its next beat."""
        with self._tx() as s:
            return s.execute(delete(MemoryJobRow).where(MemoryJobRow.doc_id == doc_id)).rowcount

    # -- claiming and holding -------------------------------------------------------------------
    def claim(self, fingerprint: str, holder: str, lease_s: float,
              doc_id: int | None = None, *, take_over: tuple[str, ...] = ()) -> MemoryJob | None:
        """Take the oldest pending job under ``fingerprint`` (one whose retry backoff is over),
        or a running one whose lease has run out, or one held by a holder of ``take_over``
        (the claimer itself, whose earlier give-back could not be written, or a process known
        to be gone); only ``doc_id``'s when given; None when there is none free. Rows other
        workers are claiming are skipped, never waited for. A job claimed ``MAX_ATTEMPTS``
        times is marked failed instead."""
        now = time.time()
        expired = MemoryJobRow.lease_until < now
        if take_over:
            expired = or_(expired, MemoryJobRow.holder.in_(list(take_over)))
        free = and_(MemoryJobRow.fingerprint == fingerprint,
                    or_(and_(MemoryJobRow.state == "pending",
                             or_(MemoryJobRow.lease_until.is_(None),
                                 MemoryJobRow.lease_until <= now)),
                        and_(MemoryJobRow.state == "running", expired)))
        if doc_id is not None:
            free = and_(free, MemoryJobRow.doc_id == doc_id)
        with self._tx() as s:
            s.execute(update(MemoryJobRow).where(free, MemoryJobRow.attempts >= MAX_ATTEMPTS)
                      .values(state="failed", holder=None, lease_until=None, updated_at=now,
                              error=literal(f"gave up after {MAX_ATTEMPTS} attempts: ")
                              + func.coalesce(MemoryJobRow.error, "its workers were killed or "
                                              "hung")))
            row = s.scalars(select(MemoryJobRow).where(free)
                            .order_by(MemoryJobRow.updated_at, MemoryJobRow.doc_id).limit(1)
                            .with_for_update(skip_locked=True)).first()
            if row is None:
                return None
            key = (MemoryJobRow.doc_id == row.doc_id, MemoryJobRow.fingerprint == fingerprint)
            # Conditional, so two processes on SQLite (no row locks) cannot both win.
            won = s.execute(update(MemoryJobRow).where(*key, free).values(
                state="running", holder=holder, lease_until=now + lease_s, updated_at=now,
                attempts=MemoryJobRow.attempts + 1)).rowcount
            if won != 1:
                return None
            return _job(s.scalars(select(MemoryJobRow).where(*key)
                                  .execution_options(populate_existing=True)).one())

    def _renew(self, s, job: MemoryJob, holder: str, lease_s: float,
               done: int | None = None, total: int | None = None) -> None:
        """Renew the lease as ``holder`` inside the caller's transaction (LeaseLost if not)."""
        now = time.time()
        values = dict(lease_until=now + lease_s, updated_at=now)
        if done is not None:
            values.update(done=done, total=total)
        n = s.execute(update(MemoryJobRow).where(
            MemoryJobRow.doc_id == job.doc_id, MemoryJobRow.fingerprint == job.fingerprint,
            MemoryJobRow.holder == holder, MemoryJobRow.state == "running").values(**values)
        ).rowcount
        if n != 1:
            raise LeaseLost(job.doc_id, holder)

    def beat(self, job: MemoryJob, holder: str, lease_s: float, done: int, total: int) -> None:
        """The holder's heartbeat: its lease renewed and its progress recorded; LeaseLost when
        the job is no longer its own."""
        with self._tx() as s:
            self._renew(s, job, holder, lease_s, done, total)

    def add_memories(self, job: MemoryJob, holder: str, lease_s: float,
                     memories: Mapping[int, torch.Tensor]) -> None:
        """Store some of the job's memories (one tree height) in one transaction, only while
        ``holder`` holds the job (the lease is renewed first, which locks the job's row: a
        take-over or a deletion waits for this transaction, or this one raises LeaseLost)."""
        ids = list(memories)
        with self._tx() as s:
            self._renew(s, job, holder, lease_s)
            for i in range(0, len(ids), 500):
                s.execute(delete(MemoryRow).where(
                    MemoryRow.doc_id == job.doc_id, MemoryRow.fingerprint == job.fingerprint,
                    MemoryRow.node_id.in_(ids[i:i + 500])))
            insert_memories(s, job.doc_id, memories, job.fingerprint)

    def finish(self, job: MemoryJob, holder: str) -> bool:
        """Mark the job done (True), if ``holder`` still holds it."""
        return self._end(job, holder, state="done", done=job.total)

    def fail(self, job: MemoryJob, holder: str, error: str) -> bool:
        """Mark the job failed with a one-line ``error`` (shown in the library)."""
        return self._end(job, holder, state="failed", error=" ".join(error.split())[:300])

    def release(self, job: MemoryJob, holder: str) -> bool:
        """Give the job back as pending (a worker stopping): another worker takes it at once;
        its attempts start again (stopping is no failed attempt)."""
        return self._end(job, holder, state="pending", attempts=0)

    def pause(self, job: MemoryJob, holder: str, cause: str, *, counted: bool = False) -> bool:
        """Give the job back after a storage fault (``cause``: "the disk is full"): pending at
        once, for the next run to resume, its error "paused: <cause>" for the library to show
        until it is claimed again. Its attempts start again (the job is not at fault: a full
        disk, a read-only database, a lock), or with ``counted`` count on (a connection lost
        while it wrote: ``claim`` fails it past MAX_ATTEMPTS, as a ``retry``)."""
        extra = {} if counted else {"attempts": 0}
        return self._end(job, holder, state="pending", error=f"{PAUSED}{cause}", **extra)

    def retry(self, job: MemoryJob, holder: str, error: str, delay_s: float) -> bool:
        """Give the job back as pending after a transient failure, claimable again in
        ``delay_s`` seconds; its attempts count on (``claim`` fails it past MAX_ATTEMPTS)."""
        return self._end(job, holder, state="pending", error=" ".join(error.split())[:300],
                         lease_until=time.time() + delay_s)

    def _end(self, job: MemoryJob, holder: str, **values) -> bool:
        values = {"holder": None, "lease_until": None, "updated_at": time.time(), **values}
        with self._tx() as s:
            return s.execute(update(MemoryJobRow).where(
                MemoryJobRow.doc_id == job.doc_id, MemoryJobRow.fingerprint == job.fingerprint,
                MemoryJobRow.holder == holder, MemoryJobRow.state == "running").values(
                **values)).rowcount == 1

    # -- reading --------------------------------------------------------------------------------
    def get(self, doc_id: int, fingerprint: str) -> MemoryJob | None:
        with self.lib._sessions() as s:
            row = s.get(MemoryJobRow, (doc_id, fingerprint))
            return None if row is None else _job(row)

    def of_documents(self, doc_ids: list[int], fingerprint: str) -> dict[int, MemoryJob]:
        """doc id -> its job under ``fingerprint`` (those that have one), in one query."""
        if not doc_ids:
            return {}
        with self.lib._sessions() as s:
            rows = s.scalars(select(MemoryJobRow).where(
                MemoryJobRow.fingerprint == fingerprint, MemoryJobRow.doc_id.in_(doc_ids)))
            return {r.doc_id: _job(r) for r in rows}

    def live_count(self, fingerprint: str) -> int:
        """Jobs under ``fingerprint`` being written now (running under a lease not run out)."""
        with self.lib._sessions() as s:
            return int(s.scalar(select(func.count()).select_from(MemoryJobRow).where(
                MemoryJobRow.fingerprint == fingerprint, MemoryJobRow.state == "running",
                MemoryJobRow.lease_until >= time.time())) or 0)

    def open_count(self, fingerprint: str) -> int:
        """Jobs under ``fingerprint`` still pending or running (whoever holds them)."""
        with self.lib._sessions() as s:
            return int(s.scalar(select(func.count()).select_from(MemoryJobRow).where(
                MemoryJobRow.fingerprint == fingerprint,
                MemoryJobRow.state.in_(("pending", "running")))) or 0)
