"""Ingest: a file becomes a stored document with a tree and one memory per node.

file -> engine.document.tree.build_tree -> engine.memory.writer.write_memories -> storage (one transaction).
A file already stored (same sha256) is not built again; if its memories were written under
another fingerprint (other backbone, parts or policy), they are rewritten from the stored tree.
Two ingests of the same file racing each other (two clients, two processes) end as one document:
the loser of the race gets the winner's document back as "reused".

The limits of ``Settings`` (file size, pages, nodes) are checked before the parse where that is
cheap (``preflight``) and on the built tree; breaking one is a DocumentError like any bad file.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.document.builders import PDF_MAGIC
from engine.runtime import Runtime
from engine.settings import Settings
from engine.document.tree import DocumentError, Tree
from engine.document.build import build_tree
from engine.memory.writer import ProgressFn, WriteStats, write_memories
from storage import DocumentMeta, DuplicateDocument


@dataclass
class IngestResult:
    doc_id: int
    title: str
    file_name: str
    source: str
    nodes: int
    leaves: int
    depth: int
    pages: int
    tokens: int
    tree_ms: float
    memory_ms: float
    reused: bool  # the file was already in the library (nothing rebuilt)

    def as_json(self) -> dict:
        return asdict(self)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _result(doc_id: int, tree: Tree, file_name: str, tree_ms: float, memory_ms: float,
            reused: bool) -> IngestResult:
    nodes = list(tree.preorder())
    return IngestResult(doc_id=doc_id, title=tree.title, file_name=file_name, source=tree.source,
                        nodes=len(nodes), leaves=len(tree.leaves()), depth=tree.depth,
                        pages=tree.pages, tokens=sum(n.tokens for n in nodes),
                        tree_ms=round(tree_ms, 1), memory_ms=round(memory_ms, 1), reused=reused)


def preflight(path: Path, settings: Settings) -> None:
    """Cheap checks before any parse: the file exists, is not empty, and is within the size
    and page limits. DocumentError with a message for the user otherwise."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise DocumentError(f"{path.name}: file not found") from None
    if not path.is_file():
        raise DocumentError(f"{path.name} is not a regular file")
    if size == 0:
        raise DocumentError(f"{path.name} is empty")
    limit = settings.max_upload_mb
    if size > limit * 2**20:
        raise DocumentError(f"{path.name} is {size / 2**20:.1f} MB; the limit is {limit:g} MB")
    with open(path, "rb") as f:
        head = f.read(4096)
    if size <= len(head) and not head.strip():
        raise DocumentError(f"{path.name} is empty (only blank space)")
    if PDF_MAGIC in head[:1024]:
        import pymupdf

        try:
            with pymupdf.open(path) as doc:
                pages = doc.page_count
        except Exception:  # damaged: the builder gives the precise message
            return
        check_pages(path.name, pages, settings)


def check_pages(name: str, pages: int, settings: Settings) -> None:
    if pages > settings.max_pages:
        raise DocumentError(f"{name} has {pages} pages; the limit is {settings.max_pages}")


def check_tree_limits(name: str, tree: Tree, settings: Settings) -> None:
    check_pages(name, tree.pages, settings)
    n = len(tree)
    if n > settings.max_nodes:
        raise DocumentError(f"{name} makes a tree of {n} nodes; the limit is {settings.max_nodes} "
                            "(split the document, or raise H2MT_MAX_NODES)")


def build_document_tree(path: Path, rt: Runtime) -> Tree:
    bb = rt.backbone
    tree = build_tree(path, bb.encode, bb.decode, rt.settings.node_token_limit)
    check_tree_limits(Path(path).name, tree, rt.settings)
    return tree


def write_tree_memories(tree: Tree, rt: Runtime, progress: ProgressFn | None = None,
                        stats: WriteStats | None = None):
    return write_memories(tree, rt.backbone, rt.parts,
                          max_batch_nodes=rt.settings.write_batch_nodes,
                          max_batch_tokens=rt.settings.write_batch_tokens,
                          progress=progress, stats=stats)


class IngestTimeout(DocumentError):
    """Indexing ran past its time limit (nothing was stored)."""


def _with_deadline(name: str, progress: ProgressFn | None, timeout_s: float | None
                   ) -> ProgressFn | None:
    if timeout_s is None:
        return progress
    deadline = time.monotonic() + timeout_s

    def check(done: int, total: int) -> None:
        if time.monotonic() > deadline:
            raise IngestTimeout(f"{name}: indexing took longer than {timeout_s:g} s and was "
                                "stopped; nothing was stored")
        if progress is not None:
            progress(done, total)
    return check


def ingest_file(path: str | Path, rt: Runtime, progress: ProgressFn | None = None, *,
                timeout_s: float | None = None) -> IngestResult:
    """Build, write and store one document (or reuse the stored one). DocumentError on bad files.

    ``timeout_s``: stop (IngestTimeout, nothing stored) when writing memories runs past it.
    """
    path = Path(path)
    preflight(path, rt.settings)
    progress = _with_deadline(path.name, progress, timeout_s)
    sha = file_sha256(path)
    lib = rt.library
    existing = lib.find_by_sha256(sha)
    if existing is not None:
        return _reuse(existing, rt, progress)
    t0 = time.perf_counter()
    tree = build_document_tree(path, rt)
    tree_ms = (time.perf_counter() - t0) * 1e3
    t1 = time.perf_counter()
    memories = write_tree_memories(tree, rt, progress)
    memory_ms = (time.perf_counter() - t1) * 1e3
    meta = DocumentMeta(title=tree.title or path.stem, file_name=path.name, sha256=sha,
                        pages=tree.pages, tree_ms=tree_ms, memory_ms=memory_ms)
    try:
        doc_id = lib.add_document(meta, tree, memories, rt.fingerprint)
    except DuplicateDocument as e:  # another client stored the same file meanwhile
        existing = e.existing_id if e.existing_id is not None else lib.find_by_sha256(sha)
        if existing is None:
            raise
        return _reuse(existing, rt, progress)
    return _result(doc_id, tree, path.name, tree_ms, memory_ms, False)


def _reuse(existing: int, rt: Runtime, progress: ProgressFn | None) -> IngestResult:
    """The stored document; its memories are rewritten first if the fingerprint lacks them."""
    lib = rt.library
    tree = lib.get_tree(existing)
    info = lib.get_document(existing)
    if rt.fingerprint in info.fingerprints:
        return _result(existing, tree, info.file_name, info.tree_ms, info.memory_ms, True)
    t0 = time.perf_counter()
    memories = write_tree_memories(tree, rt, progress)
    lib.put_memories(existing, memories, rt.fingerprint)
    return _result(existing, tree, info.file_name, info.tree_ms,
                   (time.perf_counter() - t0) * 1e3, True)
