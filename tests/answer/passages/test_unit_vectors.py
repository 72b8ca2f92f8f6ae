"""A manual's passage units encoded once (engine.answer.passages.unit_vectors, storage.unit_vectors):
stored at indexing, read back at ask time, the same quote as when they are encoded at the ask;
the real sentence encoder, a real SQLite library, a tiny backbone (quote mode does not generate)."""
from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import func, select

from engine.answer.options import AskOptions
from engine.answer.passages import unit_vectors as uv
from engine.answer.passages.passage_index import index_for
from engine.ask import ask
from engine.ingest import ingest_file
from engine.runtime import Runtime
from engine.settings import Settings
from storage import Library
from storage.models import UnitVectorRow

MANUAL = """# Widget manual

## Installing

Run the installer and answer its questions. The installer writes widget.conf for you.
Afterwards restart the widget service once.

## Power

Large widgets need a 12 V supply. Never connect them to 230 V. Small widgets run on two AA
batteries, which last about a year.

## Colours

Widgets come in red, green and blue paint. Custom colours cost extra and take six weeks.

## widget_ctl commands

widget_ctl --restart [--wait]
Restarts the widget service. It waits for the service to stop first.
"""
QUESTION = "Which supply voltage does a large widget need?"


def _runtime(tmp_path, name, tiny_backbone, tiny_parts) -> Runtime:
    settings = Settings(data_dir=tmp_path / name, cache_dir=Settings().cache_dir)
    return Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))


def _rows(rt: Runtime) -> int:
    with rt.library._sessions() as s:
        return s.scalar(select(func.count()).select_from(UnitVectorRow))


@pytest.fixture()
def manual(tmp_path):
    md = tmp_path / "widgets.md"
    md.write_text(MANUAL)
    return md


def test_stored_at_indexing_nothing_encoded_at_the_ask_and_the_same_quote(
        tmp_path, manual, tiny_backbone, tiny_parts):
    stored = _runtime(tmp_path, "stored", tiny_backbone, tiny_parts)
    doc = ingest_file(manual, stored, memories=False, unit_vectors=True).doc_id
    index = index_for(stored.cache, doc, stored.library.get_document(doc).sha256,
                         stored.library.get_tree(doc))
    n = len(uv.texts_of(index, uv.WINDOWS))
    assert n > 5 and _rows(stored) == n
    lazy = _runtime(tmp_path, "lazy", tiny_backbone, tiny_parts)
    lazy_doc = ingest_file(manual, lazy, memories=False).doc_id
    assert _rows(lazy) == 0
    a = ask(stored, doc, QUESTION, AskOptions(mode="quote"))
    b = ask(lazy, lazy_doc, QUESTION, AskOptions(mode="quote"))
    # an entry's unit is read under its heading path and entry name, identifiers as words
    # ("widget ctl commands > widget ctl restart wait"): stored as the ask reads it
    ask(stored, doc, "How do I restart the widget service with widget_ctl?",
        AskOptions(mode="quote"))
    assert _rows(stored) == n  # every text the asks read was stored: none encoded, none added
    assert 0 < _rows(lazy) <= n  # the lazy library stored what its first ask had to encode
    assert a.quote is not None and "12 V" in a.quote.text
    assert a.quote.text == b.quote.text
    before = _rows(lazy)
    added = uv.precompute(lazy, lazy_doc, index_for(
        lazy.cache, lazy_doc, lazy.library.get_document(lazy_doc).sha256,
        lazy.library.get_tree(lazy_doc)), uv.WINDOWS)
    assert added == n - before and _rows(lazy) == n
    # indexing a stored file again stores what is missing (a unit split of another version)
    with lazy.library._sessions() as s, s.begin():
        s.execute(UnitVectorRow.__table__.delete())
    later = _runtime(tmp_path, "lazy", tiny_backbone, tiny_parts)  # a process started later
    again = ingest_file(manual, later, memories=False, unit_vectors=True)
    assert again.reused and again.doc_id == lazy_doc and _rows(later) == n


def test_the_stored_encoder_gives_the_encoders_vectors_and_stores_what_it_lacks(
        tmp_path, tiny_backbone, tiny_parts):
    rt = _runtime(tmp_path, "enc", tiny_backbone, tiny_parts)
    texts = ["Installing: Run the installer.", "Power: Large widgets need a 12 V supply."]
    kept: dict = {}
    enc = uv.StoredEncoder(rt.encoder, {}, kept.update)
    first = enc.encode(texts)
    assert enc.misses == 2 and len(kept) == 2
    np.testing.assert_allclose(first, rt.encoder.encode(texts), atol=1e-6)
    again = enc.encode(texts[::-1])
    assert enc.misses == 2  # both known now
    np.testing.assert_allclose(again, first[::-1], atol=2e-3)  # float16 as stored


def test_the_windows_are_stored_under_the_precision_the_settings_name(
        tmp_path, manual, tiny_backbone, tiny_parts):
    """``Settings.window_precision``: bfloat16 windows are stored under their own fingerprint
    (float32 ones are not read as them) and give the float32 windows' quote."""
    quotes = {}
    for precision in ("fp32", "bf16"):
        settings = Settings(data_dir=tmp_path / precision, cache_dir=Settings().cache_dir,
                            window_precision=precision)
        rt = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
        doc = ingest_file(manual, rt, memories=False, unit_vectors=True).doc_id
        with rt.library._sessions() as s:
            prints = set(s.scalars(select(UnitVectorRow.fingerprint)))
        assert prints == {uv.fingerprint(uv.encoder_of(rt, uv.WINDOWS), uv.WINDOWS)}
        assert f"|{precision}|" in prints.pop()
        a = ask(rt, doc, QUESTION, AskOptions(mode="quote"))
        assert a.quote is not None
        quotes[precision] = a.quote.text
    assert quotes["bf16"] == quotes["fp32"] and "12 V" in quotes["fp32"]


def test_deleting_a_document_drops_its_unit_vectors_a_new_fingerprint_replaces_its_kind(
        tmp_path, manual, tiny_backbone, tiny_parts):
    rt = _runtime(tmp_path, "del", tiny_backbone, tiny_parts)
    doc = ingest_file(manual, rt, memories=False, unit_vectors=True).doc_id
    windows = _rows(rt)
    assert windows > 0
    one = {b"k" * 16: b"\0\0" * 384}
    # another kind (the manual's sentences) is stored beside the windows, not over them
    assert rt.library.add_unit_vectors(doc, "enc|units1|sentences", one) == 1
    assert _rows(rt) == windows + 1
    # a new fingerprint of the windows' kind (another encoder) replaces the older windows
    assert rt.library.add_unit_vectors(doc, "another-encoder|units1|windows", one) == 1
    assert _rows(rt) == 2
    assert rt.library.get_unit_vectors(doc, "another-encoder|units1|windows") == one
    assert rt.library.get_unit_vectors(doc, "enc|units1|sentences") == one
    rt.library.delete_document(doc)
    assert _rows(rt) == 0
    assert rt.library.add_unit_vectors(doc, "another-encoder|units1|windows", one) == 0


def test_the_manual_s_sentences_read_after_the_answer_are_stored_once(
        tmp_path, manual, tiny_backbone, tiny_parts):
    """The evidence lines' manual sentences (kind SENTENCES): the first answer encodes and
    stores them and gets the lines it got before; a later one reads them back, encoding only the
    answer's own sentences."""
    from engine.answer.passages.evidence import Section, scored_lines
    from engine.answer.passages.grounding import manual_sentences_encoder

    rt = _runtime(tmp_path, "evidence", tiny_backbone, tiny_parts)
    doc = ingest_file(manual, rt, memories=False).doc_id
    tree = rt.library.get_tree(doc)
    found = [Section(doc, n.id, n.title, n.text, n.page_start, n.page_end)
             for n in tree.preorder() if n.text.strip() and n.parent is not None]
    answer = "Large widgets need a 12 V supply. Restart the widget service afterwards."
    plain = scored_lines(rt.encoder, answer, found)
    first = manual_sentences_encoder(rt, {doc: tree})
    lines = scored_lines(rt.encoder, answer, found, manual_encoder=first)
    assert [(x.text, x.score) for x in lines] == [(x.text, x.score) for x in plain]
    assert first.misses == len(plain) > 5  # every manual sentence once, none of the answer's
    stored = _rows(rt)
    later = manual_sentences_encoder(_runtime(tmp_path, "evidence", tiny_backbone, tiny_parts),
                                     {doc: tree})
    again = scored_lines(rt.encoder, answer, found, manual_encoder=later)
    assert later.misses == 0 and _rows(rt) == stored
    assert [x.text for x in again][:2] == [x.text for x in plain][:2]  # float16: same order
