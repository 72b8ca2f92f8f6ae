"""The example manual (app/shared/examples.py): it ships in the package, H2MT_EXAMPLES turns it off,
the first page's line says what to do, and a visitor's first answer in a real browser: the app
started from an empty data folder indexes the example in the background, and a click on an
example question fills the question box, picks the manual and gives an answer and its quote."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.shared.examples import EXAMPLE_FILE, QUESTIONS, ExampleManual, ExampleStatus, hint
from engine.ingest import file_sha256
from engine.settings import Settings, SettingsError

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_SHA256 = "d3e48222e5b26d15d5b2ac6362b5c48c82ffc87828dbd618ba79f40d7328a0de"


def test_example_manual_ships_in_the_package(tmp_path):
    """The PDF is the corpus's etoolbox manual unchanged, and setuptools puts it (and its
    licence note) into the built package beside the module that reads it, and every package of
    the app (one per tab, the shared ones) with all its modules."""
    assert file_sha256(EXAMPLE_FILE) == EXAMPLE_SHA256
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path)],
                   cwd=REPO, check=True, capture_output=True)
    built = tmp_path / "app" / "shared" / "example_manual"
    assert file_sha256(built / EXAMPLE_FILE.name) == EXAMPLE_SHA256
    assert "LaTeX Project Public License" in (built / "README.md").read_text()
    modules = {p.relative_to(REPO) for p in (REPO / "app").rglob("*.py")}
    assert len({m.parent for m in modules}) >= 5  # app/ and its packages
    assert {p.relative_to(tmp_path) for p in (tmp_path / "app").rglob("*.py")} == modules


@pytest.mark.parametrize("raw, value", [("0", False), ("off", False), ("False", False),
                                        ("1", True), ("yes", True), (" on ", True)])
def test_examples_setting(raw, value):
    assert Settings().examples is True
    assert Settings.from_env({"H2MT_EXAMPLES": raw}).examples is value


def test_examples_setting_refuses_other_values_in_one_line():
    with pytest.raises(SettingsError) as e:
        Settings.from_env({"H2MT_EXAMPLES": "maybe"})
    assert "H2MT_EXAMPLES='maybe'" in str(e.value) and "\n" not in str(e.value)


def test_first_page_line_says_what_to_do():
    starting = hint(ExampleStatus("off"))
    indexing = hint(ExampleStatus("indexing", stage="evidence", done=0, total=296))
    halfway = hint(ExampleStatus("indexing", stage="evidence", done=120, total=296))
    ready = hint(ExampleStatus("ready", doc_id=1))
    failed = hint(ExampleStatus("failed", error="disk full"))
    assert all("being indexed" in h for h in (starting, indexing, halfway))
    assert "of 296 nodes" in indexing and "120/296 nodes" in halfway
    assert "pick an example question" in ready and "Library tab" in ready
    assert "Upload a manual" in failed and "disk full" in failed
    assert all("\n" not in h for h in (starting, indexing, halfway, ready, failed))


@pytest.mark.real_model
def test_missing_example_file_fails_in_one_line_and_stores_nothing(explorer_server, tmp_path):
    """A broken install (the PDF missing): the app runs on, the line says why."""
    _, rt = explorer_server
    from app.shared.memory_writer import memory_writer

    before = [d.id for d in rt.library.list_documents()]
    ex = ExampleManual(rt, memory_writer(rt), path=tmp_path / "etoolbox-manual.pdf")
    ex.start()
    st = ex.join(60)
    assert st.state == "failed" and "etoolbox-manual.pdf" in st.error, st
    assert "Upload a manual" in hint(st)
    assert [d.id for d in rt.library.list_documents()] == before


@pytest.mark.real_model
def test_visitor_first_answer_from_an_empty_data_folder(tmp_path):
    """``app.py`` from an empty data folder, in headless Chromium: the first page's line says
    the example is being indexed, then what to do; the example questions are shown; a click
    fills the question, picks the example manual and asks it: an answer and the manual's quote,
    no red badge, nothing loaded from outside. The question is in the library's log. The
    answered page's first screen is kept as examples.png."""
    from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, keep_screenshot

    if not CHROMIUM.exists():
        pytest.skip(f"Chromium not found at {CHROMIUM} (install Debian's chromium package)")
    sync_api = pytest.importorskip("playwright.sync_api")
    from bench.first_answer import walk
    from storage import Library

    data = tmp_path / "data"
    data.mkdir()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            w = walk(browser, data, tmp_path / "server.log", timeout_s=240, max_new_tokens=24,
                     screenshot=tmp_path / "examples.png")
        finally:
            browser.close()
    keep_screenshot(tmp_path / "examples.png")
    assert w.examples == QUESTIONS
    # every line before the last said the example was being indexed; the last says what to do
    assert all("being indexed" in h for h in w.hints[:-1]), w.hints
    assert "pick an example question" in w.hints[-1], w.hints
    assert w.question == QUESTIONS[0]
    assert "etoolbox" in w.picked, w.picked
    assert w.answer and not w.answer.startswith("(no answer"), w.answer
    assert "Where the manual answers" in w.quote and "p. " in w.quote, w.quote  # its page
    assert not w.errors and not w.outside, (w.errors, w.outside)
    lib = Library(Settings(data_dir=data).database_url)
    try:
        docs = lib.list_documents()
        assert [d.file_name for d in docs] == [EXAMPLE_FILE.name]
        logged = lib.list_queries(docs[0].id)
        assert [q.question for q in logged] == [QUESTIONS[0]]
        assert logged[0].mode == "text" and logged[0].settings["max_new_tokens"] == 24
    finally:
        lib.close()


@pytest.mark.real_model
def test_a_click_before_the_example_is_indexed_asks_nothing(explorer_server, tmp_path):
    """The question is filled (gr.Examples), but the click neither picks a manual nor asks
    while the example is not stored; the visitor is told how far indexing is."""
    import gradio as gr

    from app.shared.examples import pick_example
    from app.shared.memory_writer import memory_writer
    from app.shared.state import AppState

    _, rt = explorer_server
    writer = memory_writer(rt)
    s = AppState(rt, rt.settings, writer, examples=ExampleManual(rt, writer,
                                                                 path=tmp_path / "x.pdf"))
    with pytest.warns(UserWarning, match="being indexed"):
        doc, go = pick_example(s)
    assert go is False and isinstance(doc, type(gr.skip()))


@pytest.mark.real_model
def test_h2mt_examples_0_serves_no_example(tmp_path):
    """``H2MT_EXAMPLES=0``: the served page has neither the first-page line nor the example
    questions, and the Library tab stays the first one."""
    import json
    import urllib.request

    from bench.first_answer import free_port, start_app, stop_app, wait_up

    port, log = free_port(), tmp_path / "server.log"
    proc = start_app(tmp_path / "data", port, log, extra_env={"H2MT_EXAMPLES": "0"})
    try:
        wait_up(proc, f"http://127.0.0.1:{port}/", log, 240)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/config", timeout=30) as r:
            config = json.loads(r.read())
    finally:
        stop_app(proc)
    ids = {c.get("props", {}).get("elem_id") for c in config["components"]}
    assert "ask-question" in ids  # the page is there
    assert not ids & {"start-hint", "example-questions", "example-go"}, ids
    assert "example manual" not in log.read_text()
