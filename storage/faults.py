"""Storage faults named as what they are: the disk is full, the database is read-only, cannot be
reached, or is locked by another process past the lock timeout.

``classify`` reads an exception from the database layer (SQLAlchemy's wrapper and the driver's
exception under it: SQLite's result code, PostgreSQL's SQLSTATE) or from the file system (an
``OSError``'s errno) and returns a ``Fault``: its kind, its cause in a few words ("the disk is
full") and what a person can do. None for anything else (a constraint, a bug): those are not the
storage's fault and stay what they are. Every place that shows a storage failure to a person
uses it: the app's handlers (app/shared/user_errors.py), the command line (engine/cli.py) and
the memory jobs' status ("memories paused: the disk is full", engine/memory/worker.py).
"""
from __future__ import annotations

import errno
import logging
import sqlite3
from dataclasses import dataclass

from sqlalchemy import exc as sa_exc

from storage.connection import lock_timeout_s
from storage.errors import StorageError

DISK_FULL = "disk full"
READ_ONLY = "read-only"
UNREACHABLE = "unreachable"
LOCKED = "lock timeout"
IO_ERROR = "i/o error"


@dataclass(frozen=True)
class Fault:
    """What went wrong with the storage: ``kind`` (one of the constants above), ``cause`` (a
    few words: "the disk is full") and ``advice`` (what a person can do about it)."""

    kind: str
    cause: str
    advice: str

    def line(self, what: str | None = None) -> str:
        """One line for a person: "Uploading failed: the disk is full. Nothing was stored;
        free some space, then try again." (``what``: the action, none for the bare cause)."""
        cause = f"{what} failed: {self.cause}" if what else self.cause[:1].upper() + self.cause[1:]
        return f"{cause}. {self.advice}"


class StorageFault(StorageError):
    """A storage failure a person can act on (``fault``), raised in place of the database's
    own exception (kept as ``__cause__`` for the server log)."""

    def __init__(self, fault: Fault, what: str | None = None):
        super().__init__(fault.line(what))
        self.fault = fault


def _disk_full() -> Fault:
    return Fault(DISK_FULL, "the disk is full",
                 "Nothing half-written was kept; free some space, then try again.")


def _read_only() -> Fault:
    return Fault(READ_ONLY, "the database is read-only",
                 "Nothing was stored; make the library writable, then try again.")


def _unreachable() -> Fault:
    return Fault(UNREACHABLE, "the database cannot be reached",
                 "Nothing half-written was kept; try again once it is back.")


def _locked() -> Fault:
    return Fault(LOCKED, f"the database is locked by another process (waited "
                         f"{lock_timeout_s():g} s)",
                 "Nothing was lost; try again once the other process is done.")


def _io_error() -> Fault:
    return Fault(IO_ERROR, "the disk could not be read or written (I/O error)",
                 "Nothing half-written was kept; check the disk, then try again.")


# SQLite's primary result codes (the low byte of an extended code)
_SQLITE = {sqlite3.SQLITE_FULL: _disk_full, sqlite3.SQLITE_READONLY: _read_only,
           sqlite3.SQLITE_BUSY: _locked, sqlite3.SQLITE_LOCKED: _locked,
           sqlite3.SQLITE_CANTOPEN: _unreachable, sqlite3.SQLITE_IOERR: _io_error,
           sqlite3.SQLITE_PERM: _read_only}
# PostgreSQL's SQLSTATEs (exact ones first, then their class: the first two characters)
_SQLSTATE = {"53100": _disk_full, "25006": _read_only, "55P03": _locked, "57P01": _unreachable,
             "57P02": _unreachable, "57P03": _unreachable, "58030": _io_error}
_SQLSTATE_CLASS = {"08": _unreachable}
_ERRNO = {errno.ENOSPC: _disk_full, errno.EDQUOT: _disk_full, errno.EROFS: _read_only,
          errno.EACCES: _read_only, errno.EPERM: _read_only, errno.EIO: _io_error}


def _chain(e: BaseException):
    """``e``, the driver's exception under a SQLAlchemy one, and their explicit causes (not
    the exceptions being handled when they were raised: a bug raised while a fault was handled
    stays a bug)."""
    seen: set[int] = set()
    todo = [e]
    while todo:
        x = todo.pop(0)
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        yield x
        todo.extend([getattr(x, "orig", None), x.__cause__])


def classify(e: BaseException) -> Fault | None:
    """The storage fault ``e`` is, or None when it is none (a constraint, a bug, anything a
    person cannot fix by freeing space or waiting for the database)."""
    if isinstance(e, StorageFault):
        return e.fault
    for x in _chain(e):
        if isinstance(x, sqlite3.Error):
            code = getattr(x, "sqlite_errorcode", None)
            if code is not None and (code & 0xFF) in _SQLITE:
                return _SQLITE[code & 0xFF]()
        state = getattr(x, "sqlstate", None)  # psycopg
        if isinstance(state, str) and state:
            if state in _SQLSTATE:
                return _SQLSTATE[state]()
            if state[:2] in _SQLSTATE_CLASS:
                return _SQLSTATE_CLASS[state[:2]]()
        if isinstance(x, OSError) and x.errno in _ERRNO:
            return _ERRNO[x.errno]()
    # No cause named by the driver: a connection refused, dropped or broken off.
    if isinstance(e, sa_exc.DBAPIError) and e.connection_invalidated:
        return _unreachable()
    if isinstance(e, (sa_exc.DisconnectionError, sa_exc.InterfaceError)):
        return _unreachable()
    if isinstance(e, sa_exc.OperationalError) and not isinstance(e.orig, sqlite3.Error):
        return _unreachable()  # PostgreSQL's "connection failed", "server closed the connection"
    if isinstance(e, sa_exc.TimeoutError):  # the pool had no free connection in time
        return Fault(LOCKED, "the database is busy (no free connection in time)",
                     "Nothing was lost; try again in a moment.")
    return None


def as_fault(e: BaseException, what: str | None = None) -> StorageFault | None:
    """``e`` as a ``StorageFault`` (its one line names ``what`` failed); None when ``e`` is no
    storage fault."""
    fault = classify(e)
    if fault is None:
        return None
    return e if isinstance(e, StorageFault) and what is None else StorageFault(fault, what)


def skipped_cache_write(e: BaseException, what: str, logger: logging.Logger) -> bool:
    """For a write that only saves work later (a cache in the library): True, after one
    warning line, when ``e`` is a storage fault (the work is simply done again next time);
    False for anything else, which the caller raises."""
    fault = classify(e)
    if fault is None:
        return False
    logger.warning("%s not stored (done again when next needed): %s", what, fault.cause)
    return True
