"""PDFs as they come: a junk outline is repaired or left out, a builder that fails hands over
to the next one, and one bad file of a multi-file ``engine ingest`` never stops the rest."""
from __future__ import annotations

import json
import logging

import pymupdf
import pytest

from engine.document.builders import build_raw_tree
from engine.document.builders.pdf_chain import repaired_outline

JS_OPEN_ACTION = "<</S/JavaScript/JS(app.alert\\('Loading form...'\\))>>"


def with_js_open_action(doc: pymupdf.Document) -> pymupdf.Document:
    doc.xref_set_key(doc.pdf_catalog(), "OpenAction", JS_OPEN_ACTION)
    return doc


def form_pdf(shared_dir, tmp_path):
    """A form as such files come: etoolbox's first four pages with their body cut away (only
    the top margin left, where each page now says which form it is) and a JavaScript open
    action. Its only lines are running heads, which the fonts builder drops, and it failed
    there with an IndexError (an empty line list); made here with pymupdf."""
    doc = pymupdf.open(shared_dir / "corpus" / "etoolbox-manual.pdf")
    doc.select(range(4))
    for page in doc:
        r = page.rect
        page.add_redact_annot(pymupdf.Rect(0, r.height * 0.1, r.width, r.height))
        page.apply_redactions()
        page.insert_text((72, 30), f"Registration form, sheet {page.number + 1}", fontsize=10)
    out = tmp_path / "form.pdf"
    with_js_open_action(doc).save(out)
    return out


def test_the_form_that_broke_the_fonts_builder_goes_in(shared_dir, tmp_path, caplog):
    from engine.document.builders.pdf_fonts import build_fonts_tree

    path = form_pdf(shared_dir, tmp_path)
    with pytest.raises(IndexError):  # what the fonts builder does with it
        build_fonts_tree(pymupdf.open(path), path, "form")
    with caplog.at_level(logging.WARNING):
        tree = build_raw_tree(path)
    assert tree.source == "pages" and "sheet 3" in tree.node(3).text
    assert "the fonts builder failed (IndexError" in caplog.text


def test_junk_outlines_are_repaired_or_left_out():
    toc = [[1, "Intro", 1], [1, "Intro", 1], [1, "Usage", 2]]
    kept, junk = repaired_outline(toc, 10)
    assert kept == [[1, "Intro", 1], [1, "Usage", 2]] and junk is None
    assert "one page" in repaired_outline([[1, f"T{i}", 3] for i in range(9)], 10)[1]
    assert "distinct" in repaired_outline([[1, "Chapter", i % 5 + 1] for i in range(40)], 10)[1]
    assert "entries for" in repaired_outline([[1, f"T{i}", i % 10 + 1] for i in range(5000)], 10)[1]


def test_a_junk_outline_is_left_out_not_a_refusal(shared_dir, tmp_path, caplog):
    """camlidl's manual with thousands of outline entries, all on its last page, titles
    repeated: the outline is left out and the fonts find the headings."""
    doc = pymupdf.open(shared_dir / "corpus" / "camlidl-manual_no-outline.pdf")
    last = doc.page_count
    doc.set_toc([[1, f"Section {i % 7}", last] for i in range(3000)])
    out = tmp_path / "junk-outline.pdf"
    doc.save(out)
    with caplog.at_level(logging.WARNING):
        tree = build_raw_tree(out)
    assert tree.source == "fonts" and len(tree) > 20
    assert "outline left out (all its" in caplog.text


def test_one_bad_file_never_stops_a_multi_file_ingest(tiny_backbone, shared_dir, tmp_path,
                                                      monkeypatch, capsys):
    from engine.cli import main
    from engine.runtime import Runtime
    from tests.support.runtime import make_runtime

    rt = make_runtime(tiny_backbone, tmp_path)
    monkeypatch.setattr(Runtime, "load", classmethod(lambda cls, settings: rt))
    js = tmp_path / "camlidl-js.pdf"
    with_js_open_action(pymupdf.open(shared_dir / "corpus" / "camlidl-manual_no-outline.pdf")).save(js)
    damaged = tmp_path / "damaged.pdf"
    damaged.write_bytes(js.read_bytes()[:20000])
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\nWidgets need a 12 V supply.\n")
    files = [js, form_pdf(shared_dir, tmp_path), damaged, notes]
    code = main(["ingest", "--text-only", "--quiet", *map(str, files)])
    lines = [json.loads(ln) for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    assert len(lines) == len(files) and code == 1  # one line per file, the damaged one failed
    assert [("error" in ln) for ln in lines] == [False, False, True, False]
    assert "damaged" in lines[2]["error"]
    assert len(rt.library.list_documents()) == 3
