"""The database schema: documents, their tree nodes, node memories, the uploaded source files,
the candidate indexes of big libraries, the memory-writing jobs, the query log, the quote and
check of each logged answer, and the feedback people give on answers.

Tables are created when missing (``Base.metadata.create_all`` when a library is opened); a new
version adds tables, never columns to existing ones, so a library made by an older version
opens as it is and gets the new tables (``memory_jobs``) on its first open.

Portable SQLAlchemy types only, so any SQLAlchemy URL works (SQLite by default, PostgreSQL too).
A node's sibling position is the column ``position`` (``order`` is a reserved word).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (JSON, Boolean, DateTime, Float, ForeignKey, ForeignKeyConstraint, Index, Integer,
                        LargeBinary, String, Text)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    pass


class DocumentRow(Base):
    """One uploaded document; its tree and memories hang off it."""

    __tablename__ = "documents"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    title: Mapped[str] = mapped_column(Text)
    file_name: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    pages: Mapped[int] = mapped_column(Integer, default=0)
    tree_source: Mapped[str] = mapped_column(String(32))
    n_nodes: Mapped[int] = mapped_column(Integer)
    depth: Mapped[int] = mapped_column(Integer)
    tokens: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
    tree_ms: Mapped[float] = mapped_column(Float, default=0.0)
    memory_ms: Mapped[float] = mapped_column(Float, default=0.0)
    status: Mapped[str] = mapped_column(String(32), default="ready")


class SourceFileRow(Base):
    """The bytes of the file a document was built from (its pages are rendered from them).
    Documents stored by an older version have none until their file is uploaded again."""

    __tablename__ = "source_files"

    doc_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True)
    file_name: Mapped[str] = mapped_column(Text)
    media_type: Mapped[str] = mapped_column(String(128))
    size: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class PageRow(Base):
    """What a document's physical page carries beyond its number: the printed label the PDF gives
    it ("iv", "8") and whether its text was read by OCR. Only pages with either have a row, so
    documents stored before this table existed (and files without pages) have none."""

    __tablename__ = "document_pages"

    doc_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True)
    page: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)  # 1-based
    label: Mapped[str] = mapped_column(Text, default="")
    ocr: Mapped[bool] = mapped_column(Boolean, default=False)


class NodeRow(Base):
    """One tree node (engine.document.tree.Node) of one document."""

    __tablename__ = "nodes"

    doc_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True)
    node_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)  # tree id
    parent: Mapped[int | None] = mapped_column(Integer)
    position: Mapped[int] = mapped_column(Integer)  # Node.order
    depth: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text)
    page_start: Mapped[int | None] = mapped_column(Integer)
    page_end: Mapped[int | None] = mapped_column(Integer)
    tokens: Mapped[int] = mapped_column(Integer)
    ref: Mapped[str | None] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(32))
    # The primary key (doc_id, node_id) is the unique (doc_id, node_id) constraint.


class MemoryRow(Base):
    """One node's memory vector written by the model whose parts have ``fingerprint``."""

    __tablename__ = "memories"
    __table_args__ = (
        ForeignKeyConstraint(["doc_id", "node_id"], ["nodes.doc_id", "nodes.node_id"],
                             ondelete="CASCADE"),
        Index("ix_memories_doc_fingerprint", "doc_id", "fingerprint"),
    )

    doc_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True)
    node_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    fingerprint: Mapped[str] = mapped_column(String(128), primary_key=True, index=True)
    dtype: Mapped[str] = mapped_column(String(16))
    dim: Mapped[int] = mapped_column(Integer)
    blob: Mapped[bytes] = mapped_column(LargeBinary)
    # The primary key (doc_id, node_id, fingerprint) is the unique constraint on those columns.


class EvidenceRow(Base):
    """One node's routing evidence (phase one of ingest): its lexical tokens and its sentence-
    encoder vector, computed by the channels whose versions make ``fingerprint``."""

    __tablename__ = "evidence"
    __table_args__ = (
        ForeignKeyConstraint(["doc_id", "node_id"], ["nodes.doc_id", "nodes.node_id"],
                             ondelete="CASCADE"),
        Index("ix_evidence_doc_fingerprint", "doc_id", "fingerprint"),
    )

    doc_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True)
    node_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    fingerprint: Mapped[str] = mapped_column(String(128), primary_key=True)
    tokens: Mapped[str] = mapped_column(Text)  # lexical tokens joined by single spaces
    dtype: Mapped[str] = mapped_column(String(16))
    dim: Mapped[int] = mapped_column(Integer)
    blob: Mapped[bytes] = mapped_column(LargeBinary)  # dense vector (dim 0 when none)


class CandidateIndexRow(Base):
    """The candidate stage's index of a routed set of documents (engine.routing.candidates): an
    approximate nearest-neighbour index over their evidence vectors, serialised by the engine.
    ``key`` names the documents (ids and content hashes), the evidence fingerprint and the
    index version, so changed evidence or another set of documents finds no row and the engine
    builds a new one; ``documents`` lists the ids, to drop the row with any of them."""

    __tablename__ = "candidate_indexes"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    documents: Mapped[list[int]] = mapped_column(JSON)
    n_nodes: Mapped[int] = mapped_column(Integer)
    blob: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class UnitVectorRow(Base):
    """The sentence-encoder vector of one text of a document that the quote stage encodes (a
    unit with its heading path, or its window), under the encoder's and the unit split's
    ``fingerprint``; ``key`` is the text's 16-byte digest, ``vector`` its float16 values."""

    __tablename__ = "unit_vectors"

    doc_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(160), primary_key=True)
    key: Mapped[bytes] = mapped_column(LargeBinary(16), primary_key=True)
    vector: Mapped[bytes] = mapped_column(LargeBinary)


class MemoryJobRow(Base):
    """Writing one document's node memories under one fingerprint (phase two of ingest), as
    work shared by every process on the library (storage/jobs.py): ``pending`` until a worker
    claims it; ``running`` while ``holder`` renews its lease (``lease_until``, seconds since the
    epoch) as it writes, taken over by another worker once the lease has run out; ``done`` or
    ``failed`` (``error``) at the end. ``done``/``total`` are the holder's last reported
    progress (every replica's library view reads them)."""

    __tablename__ = "memory_jobs"
    __table_args__ = (Index("ix_memory_jobs_fingerprint_state", "fingerprint", "state"),)

    doc_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(128), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), default="pending")
    holder: Mapped[str | None] = mapped_column(String(200))
    lease_until: Mapped[float | None] = mapped_column(Float)
    done: Mapped[int] = mapped_column(Integer, default=0)
    total: Mapped[int] = mapped_column(Integer, default=0)
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # claims so far (take-overs too)
    error: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[float] = mapped_column(Float)  # seconds since the epoch


class QueryRow(Base):
    """One question asked, how it was answered, and what it cost (the query log)."""

    __tablename__ = "queries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    # Kept when its document is deleted, with doc_id cleared.
    doc_id: Mapped[int | None] = mapped_column(
        ForeignKey("documents.id", ondelete="SET NULL"), index=True)
    question: Mapped[str] = mapped_column(Text)
    mode: Mapped[str] = mapped_column(String(32))
    settings_json: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    route_json: Mapped[Any | None] = mapped_column(JSON(none_as_null=True))
    answer: Mapped[str] = mapped_column(Text, default="")
    metrics_json: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)


class QueryAskerRow(Base):
    """Who asked a logged question, when sign-in was on (a table of its own: a library made
    before issue 44 opens as it is, its questions without an asker)."""

    __tablename__ = "query_askers"

    query_id: Mapped[int] = mapped_column(
        ForeignKey("queries.id", ondelete="CASCADE"), primary_key=True)
    asker: Mapped[str] = mapped_column(String(200), index=True)


class QueryAnswerRow(Base):
    """The quote and the check of one logged answer (``Quote.as_json``, ``Check.as_json``), in
    a table of its own so that query logs of older versions open as they are (no quote/check)."""

    __tablename__ = "query_answers"

    query_id: Mapped[int] = mapped_column(
        ForeignKey("queries.id", ondelete="CASCADE"), primary_key=True)
    quote_json: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    check_json: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))


class FeedbackRow(Base):
    """A person's verdict on one logged answer: "up" or "down", and an optional line of text
    (storage/feedback.py). One per answer: a later verdict replaces the earlier one."""

    __tablename__ = "feedback"

    query_id: Mapped[int] = mapped_column(
        ForeignKey("queries.id", ondelete="CASCADE"), primary_key=True)
    rating: Mapped[str] = mapped_column(String(8), index=True)
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utc_now)
