"""engine.documents: what a runtime keeps loaded of the stored documents."""
from __future__ import annotations

import engine.documents as documents
from engine.documents import load_documents, memories_pending, routing_tree
from engine.ingest import ingest_file
from tests.support.runtime import MANUAL, make_runtime


def test_loaded_documents_are_bounded_and_routing_follows_reloads(tiny_backbone, tmp_path,
                                                                 monkeypatch):
    """The runtime keeps the most recently asked-about documents only (never evicting those of
    the request at hand), and a document loaded again gets a new routing tree, not a stale one
    found by a reused object id."""
    monkeypatch.setattr(documents, "DOCUMENTS_CACHED", 2)
    rt = make_runtime(tiny_backbone, tmp_path)
    ids = []
    for i in range(3):
        md = tmp_path / f"manual-{i}.md"
        md.write_text(MANUAL.replace("Widgets", f"Widgets of series {i}"))
        ids.append(ingest_file(md, rt, memories=False).doc_id)
    first = load_documents(rt, [ids[0]])
    tree_before = routing_tree(rt, first)
    load_documents(rt, [ids[1]])
    load_documents(rt, [ids[2]])
    cached = {key[0] for key in rt.cache["docs"]}
    assert cached == {ids[1], ids[2]}, "the least recently asked-about document went"
    assert len(load_documents(rt, ids)) == 3 and len(rt.cache["docs"]) == 3  # one request: all
    again = load_documents(rt, [ids[0]])  # evicted after the first load, loaded anew since
    assert again[ids[0]] is not first[ids[0]] and again[ids[0]].serial != first[ids[0]].serial
    assert routing_tree(rt, again) is not tree_before
    assert routing_tree(rt, again) is routing_tree(rt, load_documents(rt, [ids[0]]))  # cached


def test_memories_pending_until_phase_two_writes_them(tiny_backbone, tmp_path):
    """A document ingested without memories is pending (0 of its nodes written); once they are
    written, loading it again finds them and nothing is pending."""
    rt = make_runtime(tiny_backbone, tmp_path)
    md = tmp_path / "manual.md"
    md.write_text(MANUAL)
    doc = ingest_file(md, rt, memories=False).doc_id
    pending = memories_pending(load_documents(rt, [doc]))
    assert pending is not None and pending.done == 0 and pending.total > 0
    from engine.ingest import write_document_memories

    write_document_memories(doc, rt)
    docs = load_documents(rt, [doc])
    assert memories_pending(docs) is None and docs[doc].memories is not None


def test_what_another_process_changed_is_seen_on_the_next_load(tiny_backbone, tmp_path):
    """Two runtimes on one library file, each with its own connections and caches (two
    replicas): memories written and a document deleted through one are seen by the other on
    its next load, which checks the library in one query when nothing needs loading."""
    import pytest
    from sqlalchemy import event

    from engine.ingest import write_document_memories
    from storage import DocumentNotFound

    a = make_runtime(tiny_backbone, tmp_path)
    b = make_runtime(tiny_backbone, tmp_path)  # its own Library: engine, pool, caches
    md = tmp_path / "manual.md"
    md.write_text(MANUAL)
    doc = ingest_file(md, a, memories=False).doc_id
    assert memories_pending(load_documents(b, [doc])) is not None  # uploaded through a
    statements = []
    event.listen(b.library.engine, "before_cursor_execute",
                 lambda *args: statements.append(args[2]))
    load_documents(b, [doc])
    assert len(statements) == 1, statements  # nothing changed: one query
    write_document_memories(doc, a)  # through a
    docs = load_documents(b, [doc])
    assert memories_pending(docs) is None and docs[doc].memories is not None
    a.library.delete_document(doc)
    with pytest.raises(DocumentNotFound):
        load_documents(b, [doc])
    b.library.close()
