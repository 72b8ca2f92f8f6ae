"""The uploaded file's bytes are stored with its document (the page view renders them): in the
same transaction, deleted with it, on SQLite and PostgreSQL, and a library made before the table
existed still opens (the table is created, its documents simply have no source file)."""
from __future__ import annotations

import hashlib
import sqlite3

import pytest
from sqlalchemy import delete, func, select

from storage import DocumentNotFound, Library, SourceFile
from storage.models import DocumentRow, SourceFileRow
from tests.support.library import library, meta_for, sample_tree  # noqa: F401 (fixture)

PDF = SourceFile(file_name="manual.pdf", media_type="application/pdf",
                 data=b"%PDF-1.7\n" + bytes(range(256)) * 64 + b"\0\xff%%EOF")


def _sources(lib: Library) -> int:
    with lib.engine.connect() as conn:
        return conn.scalar(select(func.count()).select_from(SourceFileRow))


def test_source_round_trip_is_byte_exact_and_deleted_with_its_document(library):
    tree = sample_tree()
    doc = library.add_document(meta_for(tree), tree, source=PDF)
    other = library.add_document(meta_for(tree, "b" * 64), tree)
    back = library.get_source(doc)
    assert back == PDF and back.is_pdf
    assert hashlib.sha256(back.data).digest() == hashlib.sha256(PDF.data).digest()
    assert library.has_source(doc) and not library.has_source(other)
    assert library.get_source(other) is None  # stored without one (an older version)
    md = SourceFile("guide.md", "text/markdown", "# Guide\n\nÜber ✓\n".encode())
    library.put_source(other, md)
    assert library.get_source(other) == md and not library.get_source(other).is_pdf
    library.put_source(other, PDF)  # replaced, never two rows
    assert library.get_source(other) == PDF and _sources(library) == 2
    library.delete_document(doc)
    assert _sources(library) == 1
    with pytest.raises(DocumentNotFound):
        library.get_source(doc)
    with pytest.raises(DocumentNotFound):
        library.put_source(doc, PDF)
    with library.engine.begin() as conn:  # the schema cascades too
        conn.execute(delete(DocumentRow).where(DocumentRow.id == other))
    assert _sources(library) == 0


def test_failed_add_stores_no_source(library, monkeypatch):
    """The source file goes in the document's transaction: a failure after it leaves nothing."""
    import storage.library as library_module

    tree = sample_tree()

    def broken(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(library_module, "_insert_evidence", broken)
    from tests.support.library import sample_evidence

    with pytest.raises(RuntimeError, match="disk full"):
        library.add_document(meta_for(tree), tree, evidence=sample_evidence(tree), source=PDF)
    assert _sources(library) == 0 and library.list_documents() == []


def test_library_made_before_source_files_opens_and_sweeps_orphans(tmp_path):
    path = tmp_path / "old.sqlite3"
    tree = sample_tree()
    with Library(f"sqlite:///{path}") as lib:
        doc = lib.add_document(meta_for(tree), tree)
    with sqlite3.connect(path) as raw:  # what an older version's library looks like
        raw.execute("DROP TABLE source_files")
    with Library(f"sqlite:///{path}") as lib:
        assert lib.get_source(doc) is None and lib.list_documents()[0].id == doc
        assert list(lib.get_tree(doc).preorder()) == list(tree.preorder())
        lib.put_source(doc, PDF)  # the file uploaded again
        assert lib.get_source(doc) == PDF
    with sqlite3.connect(path) as raw:  # a database once opened without foreign keys
        raw.execute("PRAGMA foreign_keys=OFF")
        raw.execute("DELETE FROM nodes")
        raw.execute("DELETE FROM documents")
    with Library(f"sqlite:///{path}") as lib:
        assert lib.recovered["source_files"] == 1 and _sources(lib) == 0


def test_ingest_stores_the_file_and_an_old_document_gets_it_on_upload(tmp_path, tiny_backbone,
                                                                      tiny_parts):
    from engine.ingest import ingest_file
    from engine.runtime import Runtime
    from engine.settings import Settings

    settings = Settings(data_dir=tmp_path, dense_encoder="none")
    rt = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    md = tmp_path / "pump.md"
    md.write_text("# Pump\n\n## Priming\n\nOpen the bleed valve before the first start.\n")
    r = ingest_file(md, rt, memories=False)
    src = rt.library.get_source(r.doc_id)
    assert src == SourceFile("pump.md", "text/markdown", md.read_bytes())
    with rt.library.engine.begin() as conn:  # as if stored by a version without the table
        conn.execute(delete(SourceFileRow))
    again = ingest_file(md, rt, memories=False)
    assert again.reused and rt.library.get_source(r.doc_id) == src
    rt.library.close()
