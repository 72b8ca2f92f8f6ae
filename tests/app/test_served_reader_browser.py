"""The Ask tab with the reader on a server, in a real browser: ``transformers serve`` on the
bundled backbone (tests/conftest.py ``served_reader``) answers a text-mode question, streamed
into the page under the reader line; a server that is down gives the reader line's "not
reachable" and one line in the notice, with the quote still shown and nothing logged."""
from __future__ import annotations

import pytest

from tests.support.browser import (TIMEOUT_MS, browser, no_error_badge, open_ask_tab, open_folds,  # noqa: F401
                                  shot, value)
from tests.support.network import free_port

pytestmark = pytest.mark.real_model

MANUAL = ("# Pump guide\n\n## Priming the pump\n\nOpen the vent plug, fill the casing with water "
          "until it overflows, then refit the plug.\n\n## Changing the impeller\n\nUnplug the "
          "pump, remove the six cover screws and pull the impeller off its shaft.\n")
QUESTION = "How do I prime the pump?"
# every value the answer box takes, recorded in the page while the answer streams in
RECORD_JS = """() => { window.__answers = []; setInterval(() => {
  const v = document.querySelector('#answer-text textarea')?.value || '';
  if (v && window.__answers[window.__answers.length - 1] !== v) window.__answers.push(v);
}, 20); }"""


def launch(real_backbone, tmp_path, reader: str, model: str):
    """(url, runtime, demo) of the explorer whose reader is the server at ``reader``, with the
    pump guide in its library."""
    from app.ui import build_app, launch_app
    from engine.ingest import ingest_file
    from engine.memory.parts import load_or_init_parts
    from engine.runtime import Runtime
    from engine.settings import Settings
    from storage import Library

    settings = Settings(data_dir=tmp_path / "data", reader=reader, reader_model=model,
                        examples=False)
    rt = Runtime(settings, real_backbone, load_or_init_parts(settings, real_backbone),
                 Library(settings.database_url))
    md = tmp_path / "pump-guide.md"
    md.write_text(MANUAL)
    doc = ingest_file(md, rt).doc_id
    demo = build_app(rt, examples=False)
    for attempt in range(3):  # Gradio's own 3-second check of the page fails on a loaded machine
        port = free_port()
        try:
            launch_app(demo.queue(), prevent_thread_lock=True, server_name="127.0.0.1",
                       server_port=port, quiet=True)
            break
        except ValueError:
            demo.close()
            if attempt == 2:
                raise
    return f"http://127.0.0.1:{port}/", rt, demo, doc


def ask_on_page(page, url: str, doc: int) -> None:
    open_ask_tab(page, url, doc, "text", max_new_tokens=48)
    open_folds(page, "Metrics")
    page.locator("#ask-question textarea").fill(QUESTION)
    page.evaluate(RECORD_JS)
    page.locator("#ask-button").click()


def test_a_served_reader_answers_streamed_under_the_reader_line(browser, served_reader,
                                                                 real_backbone, tmp_path):
    reader, model = served_reader
    url, rt, demo, doc = launch(real_backbone, tmp_path, reader, model)
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.set_default_timeout(60_000)
    try:
        ask_on_page(page, url, doc)
        page.wait_for_function(
            "() => (document.querySelector('#answer-metrics')?.innerText || '').includes('TTFT')",
            timeout=TIMEOUT_MS)
        line = page.locator("#ask-reader").inner_text()
        assert f"{model} at {reader}" in line and "answered when last checked" in line, line
        assert "Memory mode answers with the local backbone" in line
        (rec,) = rt.library.list_queries(doc)
        answer = value(page, "#answer-text textarea").strip()
        assert answer and answer == rec.answer.strip() and rec.mode == "text"
        seen = page.evaluate("() => window.__answers")
        assert seen and seen[-1].strip() == answer
        assert all(answer.startswith(v.strip()) or v.strip().startswith(answer)
                   for v in seen), seen
        # streamed in, piece by piece: every state /ask sends, as an API client receives them
        # (a loaded browser may render several states in one frame, so the page's own samples
        # can hold the last one alone)
        from gradio_client import Client

        job = Client(url, verbose=False).submit(str(doc), QUESTION, "text", 3, 0, 0, True, False,
                                                48, "fused", api_name="/ask")
        final = job.result(timeout=TIMEOUT_MS / 1000)[0]
        grown = [o[0] for o in job.outputs()[1:-1] if o[0]]
        assert len(set(grown)) >= 2, f"/ask did not stream the served reader's answer: {grown}"
        assert all(final.startswith(t) or t.startswith(final) for t in grown), (grown[:4], final)
        assert page.locator("#quote-view").is_visible()
        no_error_badge(page)
        shot(page, tmp_path, "served-reader")
    finally:
        page.close()
        demo.close()
        rt.library.close()


def test_a_server_that_is_down_is_one_line_and_the_quote_stays(browser, real_backbone, tmp_path):
    reader = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    url, rt, demo, doc = launch(real_backbone, tmp_path, reader, "some-model")
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.set_default_timeout(60_000)
    try:
        ask_on_page(page, url, doc)
        assert "not reachable" in page.locator("#ask-reader").inner_text()
        page.wait_for_function(
            "() => (document.querySelector('#ask-notice')?.innerText || '').includes('reader')",
            timeout=TIMEOUT_MS)
        # (the notice shows md_text's escapes as typed, "127\\.0": an app-wide quirk of notices)
        notice = page.locator("#ask-notice").inner_text().replace("\\", "")
        assert reader in notice and "cannot be reached" in notice, notice
        assert value(page, "#answer-text textarea").startswith("(no answer")
        assert page.locator("#quote-view").is_visible()
        assert "Priming" in page.locator("#passages").inner_text()
        assert rt.library.list_queries(doc) == []  # nothing logged as an answer
        no_error_badge(page)
    finally:
        page.close()
        demo.close()
        rt.library.close()
