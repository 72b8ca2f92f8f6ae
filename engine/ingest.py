"""Ingest: a file becomes a stored document with a tree and one memory per node.

file -> engine.tree.build_tree -> engine.writer.write_memories -> storage (one transaction).
A file already stored (same sha256) is not built again; if its memories were written under
another fingerprint (other backbone, parts or policy), they are rewritten from the stored tree.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.runtime import Runtime
from engine.tree import Tree, build_tree
from engine.writer import ProgressFn, WriteStats, write_memories
from storage import DocumentMeta


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


def build_document_tree(path: Path, rt: Runtime) -> Tree:
    bb = rt.backbone
    return build_tree(path, bb.encode, bb.decode, rt.settings.node_token_limit)


def write_tree_memories(tree: Tree, rt: Runtime, progress: ProgressFn | None = None,
                        stats: WriteStats | None = None):
    return write_memories(tree, rt.backbone, rt.parts,
                          max_batch_nodes=rt.settings.write_batch_nodes,
                          max_batch_tokens=rt.settings.write_batch_tokens,
                          progress=progress, stats=stats)


def ingest_file(path: str | Path, rt: Runtime, progress: ProgressFn | None = None) -> IngestResult:
    """Build, write and store one document (or reuse the stored one). DocumentError on bad files."""
    path = Path(path)
    sha = file_sha256(path)
    lib = rt.library
    existing = lib.find_by_sha256(sha)
    if existing is not None:
        tree = lib.get_tree(existing)
        info = lib.get_document(existing)
        if rt.fingerprint in info.fingerprints:
            return _result(existing, tree, info.file_name, info.tree_ms, info.memory_ms, True)
        t0 = time.perf_counter()
        memories = write_tree_memories(tree, rt, progress)
        lib.put_memories(existing, memories, rt.fingerprint)
        return _result(existing, tree, info.file_name, info.tree_ms,
                       (time.perf_counter() - t0) * 1e3, True)
    t0 = time.perf_counter()
    tree = build_document_tree(path, rt)
    tree_ms = (time.perf_counter() - t0) * 1e3
    t1 = time.perf_counter()
    memories = write_tree_memories(tree, rt, progress)
    memory_ms = (time.perf_counter() - t1) * 1e3
    meta = DocumentMeta(title=tree.title or path.stem, file_name=path.name, sha256=sha,
                        pages=tree.pages, tree_ms=tree_ms, memory_ms=memory_ms)
    doc_id = lib.add_document(meta, tree, memories, rt.fingerprint)
    return _result(doc_id, tree, path.name, tree_ms, memory_ms, False)
