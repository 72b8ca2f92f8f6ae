"""Storage: trees and memories round-trip exactly, one transaction per write, fingerprints rule.

Every library test runs on a temporary SQLite file, and also on PostgreSQL when
H2MT_TEST_PG_URL names a throwaway database (its tables are dropped before and after each test).
"""
from __future__ import annotations

import sqlite3
from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings, strategies as st
from sqlalchemy import delete, func, insert, select, text
from sqlalchemy.exc import IntegrityError

import storage.memory_store as memory_store_module
from engine.document.tree import Tree
from storage import (DocumentMeta, DocumentNotFound, DuplicateDocument, Library, MissingMemories,
                     QueryEntry, StaleMemories)
from storage.blobs import decode_vector, encode_vector
from storage.models import DocumentRow, MemoryRow, NodeRow, QueryRow
from tests.support.library import (PG_URL, library, meta_for, sample_evidence,  # noqa: F401
                                  sample_tree)

DIM = 8


def memories_for(tree: Tree, seed: int = 0, dtype: torch.dtype = torch.float32):
    gen = torch.Generator().manual_seed(seed)
    return {nid: torch.randn(DIM, generator=gen).to(dtype) for nid in tree.graph.nodes}


def row_counts(lib: Library) -> dict[str, int]:
    with lib.engine.connect() as conn:
        return {t.__tablename__: conn.scalar(select(func.count()).select_from(t))
                for t in (DocumentRow, NodeRow, MemoryRow, QueryRow)}


def bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's raw bit pattern, so NaNs compare equal to themselves."""
    return t.view({4: torch.int32, 2: torch.int16, 8: torch.int64}[t.element_size()])


def assert_bit_equal(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert torch.equal(bits(a), bits(b))
    if not torch.isnan(a.float()).any():
        assert torch.equal(a, b)


# -- trees --------------------------------------------------------------------------------------

def test_tree_round_trip_keeps_every_node_field(library):
    tree = sample_tree()
    doc_id = library.add_document(meta_for(tree), tree, memories_for(tree), "fp-A")
    loaded = library.get_tree(doc_id)
    assert (loaded.source, loaded.title, loaded.pages) == (tree.source, tree.title, tree.pages)
    assert list(loaded.preorder()) == list(tree.preorder())  # Node equality: every field
    assert list(loaded.graph.nodes) == list(tree.graph.nodes)
    assert list(loaded.graph.edges) == list(tree.graph.edges)
    assert loaded.outline() == tree.outline()


# -- memories -----------------------------------------------------------------------------------

_BIT_DTYPES = [(torch.float32, torch.int32, 32), (torch.float16, torch.int16, 16),
               (torch.bfloat16, torch.int16, 16), (torch.float64, torch.int64, 64)]


@settings(max_examples=60, deadline=None)
@given(data=st.data(), which=st.sampled_from(_BIT_DTYPES), dim=st.integers(1, 300))
def test_blob_round_trip_is_bit_exact_for_any_bit_pattern(data, which, dim):
    dtype, int_dtype, width = which
    patterns = data.draw(st.lists(st.integers(-(2 ** (width - 1)), 2 ** (width - 1) - 1),
                                  min_size=dim, max_size=dim))
    vector = torch.tensor(patterns, dtype=int_dtype).view(dtype)  # NaNs, infs, -0.0, subnormals
    enc = encode_vector(vector)
    assert enc.dim == dim and len(enc.blob) == dim * vector.element_size()
    assert_bit_equal(decode_vector(enc.dtype, enc.dim, enc.blob), vector)


def test_blob_bytes_are_little_endian():
    enc = encode_vector(torch.tensor([1.0], dtype=torch.float32))
    assert enc.blob == b"\x00\x00\x80\x3f" and enc.dtype == "float32"
    enc = encode_vector(torch.tensor([1.0], dtype=torch.bfloat16))
    assert enc.blob == b"\x80\x3f" and enc.dtype == "bfloat16"


def test_blob_encoding_rejects_what_is_not_a_vector():
    with pytest.raises(TypeError, match="torch.Tensor"):
        encode_vector([1.0, 2.0])
    with pytest.raises(ValueError, match="1-D"):
        encode_vector(torch.zeros(2, 3))
    with pytest.raises(TypeError, match="dtype"):
        encode_vector(torch.zeros(3, dtype=torch.int32))


def test_blob_decoding_rejects_wrong_length():
    with pytest.raises(ValueError, match="bytes"):
        decode_vector("float32", 4, b"\x00" * 15)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_memories_round_trip_bit_exact(library, dtype):
    tree = sample_tree()
    memories = memories_for(tree, seed=3, dtype=dtype)
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e-40, -1.5,
                            3.0e4]).to(dtype)
    memories[2] = special
    grad = torch.randn(DIM, requires_grad=True)
    memories[3] = (grad * 2).to(dtype)  # part of a graph: must be detached, not rejected
    doc_id = library.add_document(meta_for(tree), tree, memories, "fp-A")
    loaded = library.get_memories(doc_id, "fp-A")
    assert sorted(loaded) == sorted(memories)
    for nid, vector in memories.items():
        assert_bit_equal(loaded[nid], vector.detach())
        assert loaded[nid].device.type == "cpu" and not loaded[nid].requires_grad


def test_memories_of_another_fingerprint_are_never_returned(library):
    tree = sample_tree()
    mem_a, mem_b = memories_for(tree, seed=1), memories_for(tree, seed=2)
    doc_id = library.add_document(meta_for(tree), tree, mem_a, "fp-A")

    with pytest.raises(StaleMemories) as err:
        library.get_memories(doc_id, "fp-B")
    assert "fp-A" in str(err.value) and "fp-B" in str(err.value)
    assert err.value.stored == ("fp-A",) and err.value.fingerprint == "fp-B"

    library.put_memories(doc_id, mem_b, "fp-B", memory_ms=7.0)
    assert library.memory_fingerprints(doc_id) == ("fp-A", "fp-B")
    assert library.get_document(doc_id).memory_ms == 7.0
    got_a, got_b = library.get_memories(doc_id, "fp-A"), library.get_memories(doc_id, "fp-B")
    for nid in tree.graph.nodes:
        assert torch.equal(got_a[nid], mem_a[nid]) and torch.equal(got_b[nid], mem_b[nid])

    # Replacing under the same fingerprint overwrites it.
    library.put_memories(doc_id, mem_a, "fp-B")
    assert all(torch.equal(v, mem_a[k]) for k, v in library.get_memories(doc_id, "fp-B").items())

    assert library.prune_memories(doc_id, keep_fingerprint="fp-B") == len(tree)
    with pytest.raises(StaleMemories, match="fp-B"):
        library.get_memories(doc_id, "fp-A")
    library.prune_memories(doc_id, keep_fingerprint="fp-C")
    with pytest.raises(MissingMemories) as err:
        library.get_memories(doc_id, "fp-B")
    assert not isinstance(err.value, StaleMemories) and "fp-B" in str(err.value)


def test_incomplete_memory_set_is_refused(library):
    tree = sample_tree()
    doc_id = library.add_document(meta_for(tree), tree, memories_for(tree), "fp-A")
    with library.engine.begin() as conn:
        conn.execute(delete(MemoryRow).where(MemoryRow.doc_id == doc_id, MemoryRow.node_id == 4))
    with pytest.raises(MissingMemories, match=f"{len(tree) - 1} of its {len(tree)}"):
        library.get_memories(doc_id, "fp-A")


# -- documents ----------------------------------------------------------------------------------

def test_sha256_is_recognised(library):
    tree = sample_tree()
    assert library.find_by_sha256("a" * 64) is None
    doc_id = library.add_document(meta_for(tree), tree, memories_for(tree), "fp-A")
    assert library.find_by_sha256("a" * 64) == doc_id
    with pytest.raises(DuplicateDocument) as err:
        library.add_document(meta_for(tree), tree, memories_for(tree), "fp-B")
    assert err.value.existing_id == doc_id and "already stored" in str(err.value)
    assert row_counts(library)["documents"] == 1
    assert library.memory_fingerprints(doc_id) == ("fp-A",)


def test_list_and_get_documents(library):
    tree_a, tree_b = sample_tree("A"), sample_tree("B")
    id_a = library.add_document(meta_for(tree_a, "a" * 64), tree_a, memories_for(tree_a), "fp-1")
    id_b = library.add_document(meta_for(tree_b, "b" * 64), tree_b, memories_for(tree_b), "fp-2")
    docs = library.list_documents()
    assert [d.id for d in docs] == [id_a, id_b]
    a = docs[0]
    assert (a.title, a.file_name, a.sha256, a.pages, a.tree_source) == (
        "A", "manual.pdf", "a" * 64, 12, "outline")
    assert (a.n_nodes, a.depth, a.tokens) == (len(tree_a), tree_a.depth,
                                              sum(n.tokens for n in tree_a.preorder()))
    assert (a.tree_ms, a.memory_ms, a.status) == (12.5, 40.25, "ready")
    assert a.created_at.tzinfo is not None and a.created_at.utcoffset().total_seconds() == 0
    assert a.fingerprints == ("fp-1",) and docs[1].fingerprints == ("fp-2",)
    assert library.get_document(id_b) == docs[1]
    with pytest.raises(DocumentNotFound):
        library.get_document(id_b + 100)


def test_delete_document_removes_nodes_and_memories(library):
    tree = sample_tree()
    keep = library.add_document(meta_for(tree, "k" * 64), tree, memories_for(tree), "fp-A")
    gone = library.add_document(meta_for(tree, "g" * 64), tree, memories_for(tree), "fp-A")
    library.put_memories(gone, memories_for(tree, seed=9), "fp-B")
    query_id = library.log_query(QueryEntry("how?", "tree", "like so", doc_id=gone))

    library.delete_document(gone)
    assert row_counts(library) == {"documents": 1, "nodes": len(tree), "memories": len(tree),
                                   "queries": 1}
    assert [d.id for d in library.list_documents()] == [keep]
    assert library.list_queries()[0].id == query_id and library.list_queries()[0].doc_id is None
    for call in (library.get_tree, library.get_document, library.delete_document,
                 lambda d: library.get_memories(d, "fp-A")):
        with pytest.raises(DocumentNotFound):
            call(gone)
    assert library.find_by_sha256("g" * 64) is None
    assert len(library.get_memories(keep, "fp-A")) == len(tree)


def test_database_cascades_document_deletes(library):
    """The schema itself cascades (foreign keys are enforced on SQLite too)."""
    tree = sample_tree()
    doc_id = library.add_document(meta_for(tree), tree, memories_for(tree), "fp-A")
    with library.engine.begin() as conn:
        conn.execute(delete(DocumentRow).where(DocumentRow.id == doc_id))
    assert row_counts(library) == {"documents": 0, "nodes": 0, "memories": 0, "queries": 0}


def test_memory_rows_need_their_node(library):
    tree = sample_tree()
    doc_id = library.add_document(meta_for(tree), tree, memories_for(tree), "fp-A")
    with pytest.raises(IntegrityError):
        with library.engine.begin() as conn:
            conn.execute(insert(MemoryRow).values(doc_id=doc_id, node_id=999, fingerprint="fp-A",
                                                  dtype="float32", dim=1, blob=b"\0\0\0\0"))


# -- one transaction per write ------------------------------------------------------------------

def test_failed_memory_write_leaves_nothing(library, monkeypatch):
    """A failure after the document, its nodes and some memory rows were sent rolls all back."""
    tree = sample_tree()
    monkeypatch.setattr(memory_store_module, "MEMORY_INSERT_BATCH", 2)
    real_encode = memory_store_module.encode_vector
    calls = []

    def failing_encode(vector):
        calls.append(1)
        if len(calls) == 5:  # two batches of memory rows are already inserted by now
            raise RuntimeError("disk full")
        return real_encode(vector)

    monkeypatch.setattr(memory_store_module, "encode_vector", failing_encode)
    with pytest.raises(RuntimeError, match="disk full"):
        library.add_document(meta_for(tree), tree, memories_for(tree), "fp-A")
    assert row_counts(library) == {"documents": 0, "nodes": 0, "memories": 0, "queries": 0}
    assert library.find_by_sha256("a" * 64) is None


@pytest.mark.parametrize("bad_value, error", [("not a tensor", TypeError),
                                              (torch.zeros(2, DIM), ValueError)])
def test_bad_memory_value_leaves_nothing(library, bad_value, error):
    tree = sample_tree()
    memories = memories_for(tree)
    last = max(memories)
    memories[last] = bad_value  # encoded last, after the document and nodes rows were sent
    with pytest.raises(error):
        library.add_document(meta_for(tree), tree, memories, "fp-A")
    assert row_counts(library) == {"documents": 0, "nodes": 0, "memories": 0, "queries": 0}


def test_memories_must_match_the_tree(library):
    tree = sample_tree()
    extra = memories_for(tree) | {999: torch.zeros(DIM)}
    with pytest.raises(ValueError, match="999"):
        library.add_document(meta_for(tree), tree, extra, "fp-A")
    missing = memories_for(tree)
    del missing[3]
    with pytest.raises(ValueError, match=r"missing ids \[3\]"):
        library.add_document(meta_for(tree), tree, missing, "fp-A")
    assert row_counts(library)["documents"] == 0


def test_failed_put_memories_keeps_the_previous_ones(library):
    tree = sample_tree()
    old = memories_for(tree, seed=1)
    doc_id = library.add_document(meta_for(tree), tree, old, "fp-A")
    new = memories_for(tree, seed=2)
    new[max(new)] = "not a tensor"
    with pytest.raises(TypeError):
        library.put_memories(doc_id, new, "fp-A")  # would replace fp-A's rows
    got = library.get_memories(doc_id, "fp-A")
    assert all(torch.equal(got[nid], old[nid]) for nid in tree.graph.nodes)
    with pytest.raises(DocumentNotFound):
        library.put_memories(doc_id + 1, old, "fp-A")


# -- query log and setup ------------------------------------------------------------------------

def test_query_log(library):
    tree = sample_tree()
    doc_id = library.add_document(meta_for(tree), tree, memories_for(tree), "fp-A")
    q1 = library.log_query(QueryEntry("Where is the fuse?", "tree", "Page 4.", doc_id=doc_id,
                                      settings={"aggregation": "mean", "k": 3},
                                      route=[0, 4, 5], metrics={"latency_ms": 12.0}))
    q2 = library.log_query(QueryEntry("Anything?", "flat"))
    records = library.list_queries()
    assert [r.id for r in records] == [q1, q2]
    first = records[0]
    assert (first.doc_id, first.question, first.mode, first.answer) == (
        doc_id, "Where is the fuse?", "tree", "Page 4.")
    assert first.settings == {"aggregation": "mean", "k": 3} and first.route == [0, 4, 5]
    assert first.metrics == {"latency_ms": 12.0}
    assert first.created_at.tzinfo is not None
    assert records[1].settings is None and records[1].route is None and records[1].doc_id is None
    assert [r.id for r in library.list_queries(doc_id)] == [q1]
    assert library.get_query(q2).question == "Anything?" and library.get_query(q2 + 99) is None


def test_query_log_newest_reads_only_the_end(library):
    """A view of the log's end (the app's history table) reads the newest n, oldest first."""
    tree = sample_tree()
    doc_id = library.add_document(meta_for(tree), tree, memories_for(tree), "fp-A")
    ids = [library.log_query(QueryEntry(f"q{i}", "text", doc_id=doc_id if i % 3 else None))
           for i in range(12)]
    mine = [q for i, q in enumerate(ids) if i % 3]
    assert [r.id for r in library.list_queries(doc_id, newest=3)] == mine[-3:]
    assert [r.id for r in library.list_queries(newest=5)] == ids[-5:]
    assert [r.id for r in library.list_queries(doc_id, newest=100)] == mine
    assert library.list_queries(doc_id, newest=0) == []


def test_sqlite_file_setup_and_reopen(tmp_path):
    path = tmp_path / "deep" / "er" / "lib.sqlite3"
    tree = sample_tree()
    with Library(f"sqlite:///{path}") as lib:
        doc_id = lib.add_document(meta_for(tree), tree, memories_for(tree), "fp-A")
        with lib.engine.connect() as conn:
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
            assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30000
    assert path.exists()
    with sqlite3.connect(path) as raw:
        assert {"documents", "nodes", "memories", "queries"} <= {
            r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    with Library(f"sqlite:///{path}") as again:
        assert list(again.get_tree(doc_id).preorder()) == list(tree.preorder())


def test_in_memory_sqlite_works():
    tree = sample_tree()
    with Library("sqlite://") as lib:
        doc_id = lib.add_document(meta_for(tree), tree, memories_for(tree), "fp-A")
        assert len(lib.get_memories(doc_id, "fp-A")) == len(tree)


# -- routing evidence and phase-two memories ------------------------------------------------------

def test_evidence_round_trip_and_fingerprint(library):
    import numpy as np

    tree = sample_tree()
    ev = sample_evidence(tree)
    doc = library.add_document(meta_for(tree), tree, evidence=ev)
    back = library.get_evidence(doc, ev.fingerprint)
    assert back.tokens == ev.tokens
    # stored as float16: close, not bit-exact (unit vectors need no more)
    np.testing.assert_allclose(back.dense, ev.dense, atol=2e-3)
    assert library.get_evidence(doc, "lex:1|dense:other") is None  # another encoder: re-index
    other = sample_evidence(tree, "lex:1|dense:other")
    library.put_evidence(doc, other)
    assert library.get_evidence(doc, ev.fingerprint) is None
    assert library.get_evidence(doc, other.fingerprint).tokens == ev.tokens
    with pytest.raises(ValueError):
        library.put_evidence(doc, replace(other, tokens=other.tokens[:-1]))
    library.delete_document(doc)
    with library._sessions() as s:
        from storage.models import EvidenceRow
        assert s.scalar(select(func.count()).select_from(EvidenceRow)) == 0


def test_phase_one_document_has_no_memories_and_phase_two_adds_them_by_parts(library):
    tree = sample_tree()
    doc = library.add_document(meta_for(tree), tree, evidence=sample_evidence(tree))
    p = library.memory_progress(doc, "fp")
    assert (p.done, p.total, p.complete) == (0, len(tree), False)
    with pytest.raises(MissingMemories):
        library.get_memories(doc, "fp")
    mems = memories_for(tree)
    first = {i: mems[i] for i in list(mems)[:3]}
    library.add_memories(doc, first, "fp")
    assert library.memory_progress(doc, "fp").done == 3
    with pytest.raises(MissingMemories, match="3 of its"):
        library.get_memories(doc, "fp")  # never used half-written
    assert set(library.get_memories(doc, "fp", partial=True)) == set(first)
    library.add_memories(doc, mems, "fp")  # the rest, re-adding the first three is harmless
    assert library.memory_progress(doc, "fp").complete
    assert set(library.get_memories(doc, "fp")) == set(tree.graph.nodes)


def test_candidate_indexes_are_replaced_and_dropped_with_their_documents(library):
    """One stored candidate index per set of documents: a new key for the same documents
    (changed evidence) replaces it, and deleting any of its documents drops it."""
    a = library.add_document(meta_for(sample_tree(), "a" * 64), sample_tree())
    b = library.add_document(meta_for(sample_tree(), "b" * 64), sample_tree())
    assert library.get_candidate_index("k1") is None
    library.put_candidate_index("k1", [b, a], 10, b"\x00index one\xff")
    library.put_candidate_index("solo", [a], 5, b"solo")
    assert library.get_candidate_index("k1") == b"\x00index one\xff"
    library.put_candidate_index("k2", [a, b], 10, b"index two")  # evidence changed
    assert library.get_candidate_index("k1") is None
    assert library.get_candidate_index("k2") == b"index two"
    assert library.candidate_index_keys() == ["k2", "solo"]
    library.delete_document(b)
    assert library.candidate_index_keys() == ["solo"]


def test_document_states_in_one_query(library):
    """What a replica reads per request to see what another changed: ids, content hashes and
    memory progress of the asked documents, in one SELECT."""
    from sqlalchemy import event

    tree = sample_tree()
    a, b = (library.add_document(DocumentMeta(title=t, file_name=f"{t}.pdf", sha256=t * 8), tree)
            for t in "ab")
    library.add_memories(a, {i: torch.ones(DIM) for i in tree.graph.nodes}, "fp")
    statements = []
    event.listen(library.engine, "before_cursor_execute",
                 lambda *args: statements.append(args[2]))
    states = library.document_states([a, b, 999], "fp")
    assert len(statements) == 1
    assert states[a][0] == "a" * 8 and states[a][1].complete
    assert states[b][1].done == 0 and not states[b][1].complete
    assert 999 not in states and set(library.document_states(None, "fp")) == {a, b}
    library.delete_document(b)
    assert set(library.document_states(None, "fp")) == {a}


def test_query_log_keeps_who_asked(library):
    """Issue 44: a signed-in asker is kept with the question; a question logged without one
    (sign-in off, or a library from before) stays readable and is listed for everyone."""
    old = library.log_query(QueryEntry("before sign-in?", "route"))
    bob = library.log_query(QueryEntry("bob's?", "route", asker="bob"))
    carol = library.log_query(QueryEntry("carol's?", "route", asker="carol"))
    assert [r.id for r in library.list_queries(asker="bob")] == [bob]
    assert [r.asker for r in library.list_queries()] == [None, "bob", "carol"]
    assert [r.id for r in library.list_queries(newest=1, asker="carol")] == [carol]
    assert library.get_query(bob).asker == "bob" and library.get_query(old).asker is None
