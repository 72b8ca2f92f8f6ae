"""Errors the library raises for situations users and callers can meet (not programming errors)."""
from __future__ import annotations


class StorageError(Exception):
    """Base of the library's user-facing errors."""


class DatabaseUnavailable(StorageError):
    """The database URL is malformed, names a driver that is not installed, or cannot be
    reached or opened (one line for the user; nothing was written)."""

    def __init__(self, url: str, reason: str):
        super().__init__(f"cannot open the database {url!r}: {reason}")
        self.url = url


class DocumentNotFound(StorageError, LookupError):
    def __init__(self, doc_id: int):
        super().__init__(f"no document with id {doc_id}")
        self.doc_id = doc_id


class DuplicateDocument(StorageError):
    """A file with the same sha256 is already stored; ``existing_id`` is its document."""

    def __init__(self, sha256: str, existing_id: int | None):
        where = f" as document {existing_id}" if existing_id is not None else ""
        super().__init__(f"this file (sha256 {sha256[:12]}…) is already stored{where}")
        self.sha256 = sha256
        self.existing_id = existing_id


class MissingMemories(StorageError, LookupError):
    """The document has no complete set of memories under the wanted fingerprint."""

    def __init__(self, doc_id: int, fingerprint: str, stored: tuple[str, ...] = (),
                 detail: str = ""):
        msg = detail or (f"document {doc_id} has no memories under fingerprint {fingerprint!r}; "
                         "write them with the current model first")
        super().__init__(msg)
        self.doc_id = doc_id
        self.fingerprint = fingerprint
        self.stored = stored


class StaleMemories(MissingMemories):
    """The document's memories were written by other model parts (another fingerprint)."""

    def __init__(self, doc_id: int, fingerprint: str, stored: tuple[str, ...]):
        have = ", ".join(repr(f) for f in stored)
        super().__init__(
            doc_id, fingerprint, stored,
            detail=(f"document {doc_id} has memories only under fingerprint(s) {have}, not under "
                    f"the current {fingerprint!r}; rewrite its memories with the current model"))
