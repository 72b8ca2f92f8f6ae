"""Passage vectors encoded in the background after an upload (engine/passage_worker.py): the
upload is askable at once and says so, an ask meanwhile works and encodes only what it needs,
the background work finishes and resumes after a restart. The real sentence encoder, a real
SQLite library, a tiny backbone (quote mode does not generate), the app's upload handler; the
background thread is held at a chosen encoder call by events, never by sleeps."""
from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select

from app.library.library_tab import alone, passages_line, upload
from app.shared.memory_writer import MemoryWriter
from app.shared.state import AppState
from engine.answer.options import AskOptions
from engine.answer.passages import unit_vectors as uv
from engine.ask import WORDS_ONLY, ask
from engine.ingest import evidence_encoder, ingest_file, pending_unit_vectors
from engine.routing.evidence import evidence_fingerprint
from engine.runtime import Runtime
from engine.settings import Settings
from storage import Library
from storage.models import UnitVectorRow

TOPICS = [
    ("Installing", "Run the installer and answer its questions. The installer writes widget.conf "
                   "for you. Afterwards restart the widget service once."),
    ("Power", "Large widgets need a 12 V supply. Never connect them to 230 V. Small widgets run "
              "on two AA batteries, which last about a year."),
    ("Colours", "Widgets come in red, green and blue paint. Custom colours cost extra and take "
                "six weeks."),
    ("Cleaning", "Wipe the housing with a dry cloth. Do not use solvents on the display."),
    ("Noise", "A humming widget has a loose fan. Tighten the four fan screws by hand."),
    ("Storage", "Store widgets between 5 and 40 degrees. Keep them away from direct sunlight."),
    ("Updates", "The firmware updates itself at night. Updates never change your settings."),
    ("Warranty", "The warranty lasts two years. Opening the housing ends the warranty."),
]
PARTS = ["fan", "lid", "hinge", "filter", "pump", "valve", "motor", "belt", "sensor", "latch"]
# more passages than an ask encodes (sentences.ENCODED, 32), so an ask encodes a part of them
MANUAL = ("# Widget manual\n\n" + "\n\n".join(f"## {t}\n\n{body}" for t, body in TOPICS)
          + "\n\n## Parts\n\n" + "\n\n".join(
              f"### The {p}\n\n" + " ".join(
                  f"Step {k} for the {p}: turn screw {k} of the {p} by {k * 15} degrees."
                  for k in range(1, 5)) for p in PARTS) + "\n")
QUESTION = "Which supply voltage does a large widget need?"
STORE_EVERY = 3  # texts stored per chunk here (64 and more in use), so there are several


class HeldEncoder:
    """The runtime's sentence encoder, held at its ``hold_at``-th call from the passage worker's
    thread until ``release`` is set (``reached`` says it got there); asks pass straight through.
    ``worker_texts``: the texts the worker had encoded."""

    def __init__(self, encoder, hold_at: int = 1):
        self.encoder, self.hold_at = encoder, hold_at
        self.reached, self.release = threading.Event(), threading.Event()
        self.calls, self.worker_texts = 0, 0

    def __getattr__(self, name):
        return getattr(self.encoder, name)

    def encode(self, texts, **kwargs):
        if threading.current_thread().name == "passage-worker":
            self.calls += 1
            if self.calls == self.hold_at:
                self.reached.set()
                assert self.release.wait(60), "never released"
            self.worker_texts += len(texts)
        return self.encoder.encode(texts, **kwargs)


def _runtime(data, tiny_backbone, tiny_parts, hold_at: int = 1, **given) -> Runtime:
    settings = Settings(data_dir=data, cache_dir=Settings().cache_dir, app_worker=False, **given)
    rt = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    rt._encoder = HeldEncoder(rt.encoder, hold_at)
    return rt


def _rows(rt: Runtime) -> int:
    with rt.library._sessions() as s:
        return s.scalar(select(func.count()).select_from(UnitVectorRow))


def _app(rt: Runtime) -> tuple[MemoryWriter, AppState]:
    """The app's background writer and state over ``rt``."""
    writer = MemoryWriter(rt)
    return writer, AppState(rt, rt.settings, writer)


def _upload(s: AppState, manual) -> str:
    """``manual`` through the Library tab's upload handler; its status line."""
    tab = alone(s)
    return upload(s, tab, [str(manual)], progress=lambda *a, **k: None)[tab.status]


@pytest.fixture()
def manual(tmp_path, monkeypatch):
    monkeypatch.setattr(uv, "STORE_EVERY", STORE_EVERY)
    md = tmp_path / "widgets.md"
    md.write_text(MANUAL)
    return md


def test_an_upload_is_askable_before_its_passage_vectors_and_an_ask_meanwhile_works(
        tmp_path, manual, tiny_backbone, tiny_parts):
    rt = _runtime(tmp_path / "lib", tiny_backbone, tiny_parts)
    writer, s = _app(rt)
    try:
        status = _upload(s, manual)
        doc = rt.library.list_documents()[0].id
        stored, total = pending_unit_vectors(doc, rt)
        assert stored == 0 and total > 3 * STORE_EVERY
        assert f"Ready to ask; preparing passages 0/{total} in the background" in status, status
        assert rt.encoder.reached.wait(60)  # the worker is inside its first chunk, held
        line = passages_line(s, rt.library.list_documents())
        assert f"#{doc} ready to ask; preparing passages 0/{total}" in line, line
        a = ask(rt, doc, QUESTION, AskOptions(mode="quote"))
        assert a.quote is not None and "12 V" in a.quote.text
        asked = _rows(rt)
        assert 0 < asked < total  # the ask stored what it encoded: its candidates, not all
        rt.encoder.release.set()
        assert writer.passages.wait_idle(60)
        assert _rows(rt) == total and pending_unit_vectors(doc, rt) == (total, total)
        # the ask's texts are not encoded again (but for the first chunk, chosen before the ask)
        assert rt.encoder.worker_texts <= total - asked + STORE_EVERY
        assert passages_line(s, rt.library.list_documents()) == ""
        again = ask(rt, doc, QUESTION, AskOptions(mode="quote"))
        assert again.quote is not None and again.quote.text == a.quote.text
    finally:
        rt.encoder.release.set()
        writer.stop()


def test_a_big_upload_is_routed_by_its_words_until_its_sections_vectors_are_stored(
        tmp_path, manual, tiny_backbone, tiny_parts):
    """An upload at or over ``background_evidence_nodes`` is stored with its lexical evidence:
    askable by its words at once, its nodes' dense vectors encoded first in the background
    (the same vectors phase one gives), then the sentence-encoder channel joins the route."""
    import numpy as np

    rt = _runtime(tmp_path / "lib", tiny_backbone, tiny_parts, background_evidence_nodes=0)
    writer, s = _app(rt)
    try:
        status = _upload(s, manual)
        doc = rt.library.list_documents()[0].id
        fp = evidence_fingerprint(evidence_encoder(rt))
        assert rt.encoder.reached.wait(60)  # the worker holds at its first encode: the nodes'
        assert not rt.library.evidence_has_vectors(doc, fp)
        assert "its sections found by their words for now" in status, status
        assert writer.passages.words_only(doc)
        a = ask(rt, doc, QUESTION, AskOptions(mode="quote"))
        assert a.quote is not None and "12 V" in a.quote.text
        assert "lexical" in a.route.channels and "dense" not in a.route.channels
        assert WORDS_ONLY in (a.warning or ""), a.warning
        rt.encoder.release.set()
        assert writer.passages.wait_idle(60)
        assert not writer.passages.words_only(doc)
        stored = rt.library.get_evidence(doc, fp)
        other = _runtime(tmp_path / "other", tiny_backbone, tiny_parts)  # phase one's way
        other.encoder.release.set()
        whole = other.library.get_evidence(
            ingest_file(manual, other, memories=False).doc_id, fp)
        assert np.array_equal(stored.dense, whole.dense) and stored.tokens == whole.tokens
        again = ask(rt, doc, QUESTION, AskOptions(mode="quote"))  # the stored vectors read
        assert "dense" in again.route.channels and "lexical" in again.route.channels
        assert WORDS_ONLY not in (again.warning or "")
    finally:
        rt.encoder.release.set()
        writer.stop()


def test_an_upload_under_the_size_gets_its_sections_vectors_in_phase_one(
        tmp_path, manual, tiny_backbone, tiny_parts):
    rt = _runtime(tmp_path / "lib", tiny_backbone, tiny_parts)  # the default size
    doc = ingest_file(manual, rt, memories=False, background=True).doc_id
    assert len(rt.library.get_tree(doc)) < rt.settings.background_evidence_nodes
    assert rt.library.evidence_has_vectors(doc, evidence_fingerprint(evidence_encoder(rt)))


def test_the_background_work_stops_after_a_chunk_and_resumes_after_a_restart(
        tmp_path, manual, tiny_backbone, tiny_parts):
    first = _runtime(tmp_path / "lib", tiny_backbone, tiny_parts, hold_at=2)
    writer = MemoryWriter(first)
    try:
        doc = ingest_file(manual, first, memories=False).doc_id
        writer.submit(doc)
        assert first.encoder.reached.wait(60)  # inside its second chunk: the first is stored
        writer.passages.stop(0)  # the process stops; the chunk being encoded is still stored
        first.encoder.release.set()
        writer.stop()
        stored, total = pending_unit_vectors(doc, first)
        assert stored == 2 * STORE_EVERY < total
    finally:
        first.encoder.release.set()
        writer.stop()
    later = _runtime(tmp_path / "lib", tiny_backbone, tiny_parts)  # a process started later
    later.encoder.release.set()
    again = MemoryWriter(later)
    try:
        assert pending_unit_vectors(doc, later) == (stored, total)  # read from the library
        again.resume_incomplete()
        assert again.passages.wait_idle(60)
        assert _rows(later) == total
        assert later.encoder.worker_texts == total - stored  # only what was missing
    finally:
        again.stop()


def test_after_a_restart_the_library_line_says_a_big_upload_is_still_found_by_its_words(
        tmp_path, manual, tiny_backbone, tiny_parts):
    """A big upload stored with its words only, then the app restarted before its sections'
    vectors were encoded: the resumed work says, as the upload did, that it is found by its
    words until they are stored, and no longer once they are."""
    first = _runtime(tmp_path / "lib", tiny_backbone, tiny_parts, background_evidence_nodes=0)
    doc = ingest_file(manual, first, memories=False, background=True).doc_id
    fp = evidence_fingerprint(evidence_encoder(first))
    assert not first.library.evidence_has_vectors(doc, fp)
    first.library.close()  # the process ends before its passage worker ran
    later = _runtime(tmp_path / "lib", tiny_backbone, tiny_parts, background_evidence_nodes=0)
    writer, s = _app(later)
    try:
        assert passages_line(s, later.library.list_documents()) == ""
        writer.resume_incomplete()
        assert later.encoder.reached.wait(60)  # held at its first encode: the sections'
        assert writer.passages.words_only(doc)
        line = passages_line(s, later.library.list_documents())
        assert f"#{doc} ready to ask, its sections found by their words for now" in line, line
        later.encoder.release.set()
        assert writer.passages.wait_idle(60)
        assert later.library.evidence_has_vectors(doc, fp)
        assert not writer.passages.words_only(doc)
        assert passages_line(s, later.library.list_documents()) == ""
    finally:
        later.encoder.release.set()
        writer.stop()


def test_the_cli_ingest_still_stores_every_passage_vector_in_the_same_call(
        tmp_path, manual, tiny_backbone, tiny_parts):
    rt = _runtime(tmp_path / "lib", tiny_backbone, tiny_parts)
    doc = ingest_file(manual, rt, memories=False, unit_vectors=True).doc_id
    stored, total = pending_unit_vectors(doc, rt)
    assert stored == total == _rows(rt) > 3 * STORE_EVERY


def test_background_encodes_run_on_a_copy_of_the_model_and_give_the_same_vectors(
        tiny_backbone, tiny_parts, tmp_path):
    """An ask's encode never waits on the lock of a background batch (the background has its
    own copy of the model), and the copy's vectors are the model's, bit for bit."""
    import numpy as np

    enc = _runtime(tmp_path / "lib", tiny_backbone, tiny_parts).encoder.encoder
    texts = [body for _, body in TOPICS]
    out: dict = {}

    def background():
        with enc.in_background():
            out["vectors"] = enc.encode(texts)
            out["model"] = enc._model()[0]

    t = threading.Thread(target=background)
    t.start()
    t.join(60)
    assert out["model"] is not enc.model and enc._model()[0] is enc.model
    assert np.array_equal(out["vectors"], enc.encode(texts))
