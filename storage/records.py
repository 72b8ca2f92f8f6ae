"""Plain records passed in and out of the library (never ORM objects, bound to sessions)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any


@dataclass(frozen=True)
class DocumentMeta:
    """What the caller knows about a document besides its tree, when adding it."""

    title: str  # display title; also the title of the Tree read back
    file_name: str
    sha256: str  # hex digest of the uploaded file's bytes
    pages: int = 0  # also the pages of the Tree read back
    tree_ms: float = 0.0  # time spent building the tree
    memory_ms: float = 0.0  # time spent writing the memories


@dataclass(frozen=True)
class SourceFile:
    """The uploaded file a document was built from, byte for byte."""

    file_name: str
    media_type: str  # e.g. application/pdf, text/markdown
    data: bytes

    @property
    def is_pdf(self) -> bool:
        return self.media_type == "application/pdf"


@dataclass(frozen=True)
class DocumentInfo:
    """A stored document, as listed to users."""

    id: int
    title: str
    file_name: str
    sha256: str
    pages: int
    tree_source: str
    n_nodes: int
    depth: int
    tokens: int
    created_at: datetime  # timezone-aware, UTC
    tree_ms: float
    memory_ms: float
    status: str
    fingerprints: tuple[str, ...]  # fingerprints under which memories are stored, sorted


@dataclass(frozen=True)
class QueryEntry:
    """One question to log: its answer, settings, route and metrics, the answer's quote and
    check (all JSON-serialisable) and who asked it (a signed-in name, or None)."""

    question: str
    mode: str
    answer: str = ""
    doc_id: int | None = None  # the one document asked about (None: several, or none)
    settings: dict[str, Any] | None = None
    route: Any = None
    metrics: dict[str, Any] | None = None
    asker: str | None = None
    quote: dict[str, Any] | None = None
    check: dict[str, Any] | None = None


@dataclass(frozen=True)
class QueryRecord:
    """One logged question and its answer."""

    id: int
    doc_id: int | None  # None once its document is deleted, or for questions over no document
    question: str
    mode: str
    settings: dict[str, Any] | None
    route: Any
    answer: str
    metrics: dict[str, Any] | None
    created_at: datetime  # timezone-aware, UTC
    asker: str | None = None  # the signed-in name that asked (None: no sign-in, or older)


@dataclass(frozen=True)
class NodeEvidence:
    """Routing evidence of a document's nodes, row i = node id i (phase one of ingest).

    ``tokens[i]``: the node's lexical tokens (empty for nodes kept out of evidence);
    ``dense``: float32 array [n_nodes, dim] of unit vectors (zero rows for nodes without
    evidence), or None when no sentence encoder was used; ``fingerprint``: the versions of the
    tokenizer and encoder that made them (evidence under another fingerprint is never used)."""

    tokens: list[list[str]]
    dense: Any  # numpy.ndarray [n, dim] float32, or None
    fingerprint: str


@dataclass(frozen=True)
class MemoryProgress:
    """How many of a document's node memories exist under one fingerprint (phase two)."""

    done: int
    total: int

    @property
    def complete(self) -> bool:
        return self.done >= self.total


def as_utc(moment: datetime) -> datetime:
    """SQLite drops time zones; everything stored is UTC."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment
