"""Untrusted files (issue 44): a huge text without headings is refused within the ingest's
deadline (never held for hours), and the deadline stops every step of building a tree."""
from __future__ import annotations

import random
import time

import pytest

from engine.document.tree import DocumentError
from engine.settings import Settings

WORDS = ("the pump valve motor pressure check open close install manual error filter water "
         "seal gasket impeller").split()


def headingless_text(path, mb: float) -> None:
    """``mb`` megabytes of paragraphs of words, not one heading."""
    rng = random.Random(0)
    with open(path, "w") as f:
        size = 0
        while size < mb * 2**20:
            para = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 120))) + ".\n\n"
            f.write(para)
            size += len(para)


@pytest.fixture(scope="module")
def rt(tiny_backbone, tiny_parts, tmp_path_factory):
    from engine.runtime import Runtime
    from storage import Library

    folder = tmp_path_factory.mktemp("untrusted")
    settings = Settings(data_dir=folder)
    runtime = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    yield runtime
    runtime.library.close()


def test_a_90_mb_text_without_headings_is_refused_within_the_deadline(rt, tmp_path):
    from engine.ingest import ingest_file

    big = tmp_path / "huge.txt"
    headingless_text(big, 90)
    deadline_s = 120.0
    t0 = time.monotonic()
    with pytest.raises(DocumentError) as e:
        ingest_file(big, rt, timeout_s=deadline_s, memories=False)
    took = time.monotonic() - t0
    assert took < deadline_s + 10, took
    assert "huge.txt" in str(e.value) and ("H2MT_MAX_NODES" in str(e.value)
                                           or "longer than" in str(e.value))
    assert rt.library.list_documents() == []  # nothing stored


def test_the_deadline_stops_building_a_tree(rt, tmp_path):
    """A deadline too short for the file stops chunking, encoding or clustering with one line
    naming the file and the step."""
    from engine.ingest import IngestTimeout, ingest_file

    text = tmp_path / "medium.txt"
    headingless_text(text, 0.3)
    with pytest.raises(IngestTimeout, match=r"medium\.txt: indexing took longer than 0\.01 s "
                                            r"\(while (parsing|chunking|encoding|clustering)\)"):
        ingest_file(text, rt, timeout_s=0.01, memories=False)
    assert rt.library.list_documents() == []


def test_a_huge_page_is_rendered_within_the_pixel_cap():
    """A PDF page declaring 200 x 200 inches renders at a lower resolution, not to 4.8e8
    pixels."""
    import io

    import pymupdf
    from PIL import Image

    from app.views.pages import MAX_PAGE_PIXELS, Line, render_pdf

    doc = pymupdf.open()
    page = doc.new_page(width=14400, height=14400)
    page.insert_text((72, 72), "Open the vent plug.", fontsize=12)
    data = doc.tobytes()
    view = render_pdf(data, [Line("Open the vent plug.", 1)], 1, 1)
    w, h = Image.open(io.BytesIO(view.png)).size
    assert w * h <= MAX_PAGE_PIXELS and w > 100


def test_an_upload_of_too_many_files_is_refused_whole(rt, tmp_path):
    import gradio as gr

    from app.library.library_tab import alone, upload
    from app.shared.memory_writer import memory_writer
    from app.shared.state import AppState

    s = AppState(rt, rt.settings.with_(max_upload_files=2), memory_writer(rt))
    files = []
    for i in range(3):
        f = tmp_path / f"m{i}.md"
        f.write_text(f"# M{i}\n\nText {i}.\n")
        files.append(str(f))
    with pytest.raises(gr.Error, match="3 files at once; the limit is 2"):
        upload(s, alone(s), files, progress=lambda *a, **k: None)
    assert rt.library.list_documents() == []


def test_caches_are_bounded(rt, tmp_path):
    """Trees kept in the app: the least recently used go; rendered pages on disk: the newest
    kept; the query log's routes: the newest questions keep theirs."""
    import os

    from app.server.page_cache import prune_rendered_pages
    from app.shared.memory_writer import memory_writer
    from app.shared.state import TREE_CACHE, AppState
    from engine.ingest import ingest_file
    from storage import QueryEntry

    md = tmp_path / "one.md"
    md.write_text("# One\n\nText.\n")
    doc = ingest_file(md, rt, memories=False).doc_id
    s = AppState(rt, rt.settings, memory_writer(rt))
    for i in range(TREE_CACHE + 5):
        s.trees[1000 + i] = object()
    s.tree_of(doc)
    assert len(s.trees) == TREE_CACHE and doc in s.trees and 1000 not in s.trees

    cache = tmp_path / "gradio"
    for i in range(10):
        f = cache / f"h{i}" / "image.webp"
        f.parent.mkdir(parents=True)
        f.write_bytes(b"x")
        os.utime(f, (1000 + i, 1000 + i))
    (cache / "upload").mkdir()
    (cache / "upload" / "manual.pdf").write_bytes(b"%PDF")
    assert prune_rendered_pages(cache, keep=3) == 7
    assert sorted(p.parent.name for p in cache.glob("*/image.webp")) == ["h7", "h8", "h9"]
    assert (cache / "upload" / "manual.pdf").exists()

    lib = rt.library
    ids = [lib.log_query(QueryEntry(f"q{i}", "route", route=[{"node": i}]), keep_routes=3)
           for i in range(8)]
    kept = {q.id: q.route for q in lib.list_queries() if q.id in ids}
    assert [kept[i] is not None for i in ids] == [False] * 5 + [True] * 3
