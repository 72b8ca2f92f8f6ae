"""The manual explorer in the browser: library, ask (with the routing tree) and compare.

This module is the layout: the page, its tabs and the events that span tabs. Each tab is one
package whose tab module holds its components, its handlers (module level, over the app's state
object) and its events: app/library/library_tab.py, app/ask/ask_tab.py (its components, handlers
and history beside it in app/ask/), app/compare/compare_tab.py, app/evaluation/evaluation_tab.py.
What they share is in app/shared/ (the state and its helpers in app/shared/state.py, a handler
bound to its inputs by app/shared/binding.py, the engine's errors shown by
app/shared/user_errors.py, the lines on memories not written yet in app/shared/memory_lines.py,
one parsed ask in app/shared/ask_request.py, the background memory writer in
app/shared/memory_writer.py, the example manual and its questions in app/shared/examples.py) and
in app/views/ (an answer's views in app/views/answer_view.py and its last notes in
app/views/view_state.py, the routing tree in app/views/figures.py (the nodes it draws in
app/views/visible_tree.py, its layout in app/views/layout.py, its hover text in
app/views/hover.py), the icicle in app/views/icicle.py and the page view in app/views/pages.py).
The documented API's MCP tools are in app/server/mcp_tools.py. Every handler calls the engine
(ingest, ask) or the library and turns the result into component values; the engine never
imports anything from here.

Model use: indexing, the background memory writer and answers of every mode share the one
backbone and run side by side. The ArcAligner's slot context is thread-local and its attachment
reference-counted (engine/memory/aligner.py), so an answer that arms memory slots cannot leak
them into a concurrent forward of the writer or of another answer. Queues: indexing has its own
queue (one file at a time), answers theirs (a few at a time), so a long ingest never holds
questions back.

Memories: at start, documents whose memories are incomplete under the runtime's fingerprint are
queued again on the background writer, so an interrupted write resumes where it stopped. A
gr.Timer polls the library's progress every few seconds (one COUNT per document being written).

Page view (app/views/pages.py): selecting a cited node or an evidence line renders that section's
PDF page(s) from the file stored with the document, the evidence sentences highlighted (a sentence
over a page break on both pages); Markdown, HTML and text manuals show the section's text with the
sentences marked. Documents stored before files were kept show their text until the file is uploaded
again. Titles and text from manuals are shown as text, never as markup.
"""
from __future__ import annotations

import gradio as gr

from app.ask import ask_tab
from app.ask.ask_history import HISTORY_ROWS
from app.compare import compare_tab
from app.evaluation import evaluation_tab
from app.library import library_tab
from app.library.library_tab import LIBRARY_COLUMNS, node_api, poll, refresh
from app.server import mcp_tools
from app.shared import examples as example_questions
from app.shared.accounts import Accounts
from app.shared.binding import bind
from app.shared.memory_writer import MemoryWriter, memory_writer
from app.shared.state import AppState, md_text
from app.views.answer_view import route_from_log
from app.views.passages_view import CSS as PASSAGES_CSS
from engine.runtime import Runtime

# the names other modules and the tests import from here
__all__ = ["APP_CSS", "build_app", "launch_app", "HISTORY_ROWS", "LIBRARY_COLUMNS", "MemoryWriter", "memory_writer",
           "md_text", "route_from_log"]

# The page's own style, given to ``launch(css=...)`` (Gradio 6 takes CSS there, not in Blocks):
# the quote block sits tight under its one-line header and over the key line, the title and its
# line share one line, the choices' buttons are low and their help lines show on hovering their
# labels (marked "?"), so that a quote of five or six lines, the answer and the top of the
# routing tree still fit a 1440x900 first screen (tests/app/test_app_browser.py,
# tests/app/test_newcomer_browser.py). A table's header never breaks inside a word.
APP_CSS = """
#quote-view p { margin-top: 0; margin-bottom: 0.2em; }
#ask-doc .validation-error, #ask-question .validation-error { display: none !important; }
.gradio-container { --layout-gap: 10px !important; }
#ask-tab { --layout-gap: 8px !important; }
#app-intro h2 { display: inline; margin: 0 0.6em 0 0; }
#app-intro p { display: inline; margin: 0; }
#start-hint p, #ask-notice p, #key-line p { margin-top: 0; margin-bottom: 0; }
#ask-mode .info-text, #ask-router .info-text, #ask-max-new .info-text { display: none; }
#ask-mode [data-testid='block-info']:hover ~ .info-text,
#ask-router [data-testid='block-info']:hover ~ .info-text,
#ask-max-new [data-testid='block-info']:hover ~ .info-text {
  display: block; position: absolute; z-index: 50; max-width: 36em; padding: 4px 8px;
  pointer-events: none;
  background: var(--background-fill-primary); border: 1px solid var(--border-color-primary);
  border-radius: 4px; box-shadow: 0 2px 6px rgba(0, 0, 0, 0.15); }
#ask-mode [data-testid='block-info']::after, #ask-router [data-testid='block-info']::after,
#ask-max-new [data-testid='block-info']::after {
  content: "?"; display: inline-block; width: 1.2em; height: 1.2em; line-height: 1.2em;
  margin-left: 0.35em; border: 1px solid currentColor; border-radius: 50%; text-align: center;
  font-size: 0.8em; }
#ask-mode [data-testid$='radio-label'], #ask-router [data-testid$='radio-label'] {
  padding-top: 3px !important; padding-bottom: 3px !important; }
#evidence-table th, #cited-table th, #eval-table th, #outline-table th,
#evidence-table th *, #cited-table th *, #eval-table th *, #outline-table th * {
  word-break: normal !important; overflow-wrap: normal !important; }
""" + PASSAGES_CSS


def launch_app(demo: gr.Blocks, **kwargs):
    """``demo.launch`` as every launch of the explorer needs it (the app's server and the
    tests' in-process ones alike): with the page's own style (``APP_CSS``) and without
    server-side rendering; ``kwargs`` are Gradio's own."""
    return demo.launch(css=APP_CSS, ssr_mode=False, **kwargs)


MEMORY_POLL_S = 3.0  # how often the page asks how far the background memory writer is


def build_app(rt: Runtime, *, max_file_mb: float | None = None, max_pages: int | None = None,
              examples: bool = False, accounts: Accounts | None = None) -> gr.Blocks:
    """The app over ``rt``; limits come from ``rt.settings`` (the keywords override two).
    ``examples``: index the example manual in the background and show its questions
    (app/shared/examples.py; the served app passes ``rt.settings.examples``). ``accounts``: who may
    upload and delete and whose history each sees (app/shared/accounts.py; None: no sign-in); the
    sign-in itself is ``launch(auth=accounts.check)``."""
    writer = memory_writer(rt)
    s = AppState(rt, rt.settings.with_(max_upload_mb=max_file_mb, max_pages=max_pages), writer,
                 examples=example_questions.example_manual(rt, writer) if examples
                 else None, accounts=accounts or Accounts())
    with gr.Blocks(title="Manual explorer", analytics_enabled=False, fill_width=True) as demo:
        gr.Markdown(
            "## Manual explorer\n"
            "Ask a technical manual a question: see the passage that answers it, the sections "
            "followed to find it and the page it is on.", elem_id="app-intro")
        hint = example_questions.build_hint(s) if s.examples else None
        with gr.Tabs(selected="ask" if s.examples else None):
            # The manual pickers accept any value (allow_custom_value): an API client names any
            # stored manual's id (or "all") whatever its session has seen; the handlers check
            # it against the library and reject an unknown id with one line.
            lib = library_tab.build(s)
            ask = ask_tab.build(s)
            cmp = compare_tab.build(s)
            evl = evaluation_tab.build(s)

        # -- events ----------------------------------------------------------------------------
        timer = gr.Timer(MEMORY_POLL_S)
        poll_key = gr.State("")
        pickers_out = [lib.doc, ask.inputs.doc, cmp.doc]
        poll_in = [poll_key, ask.inputs.doc]
        library_tab.wire(s, lib, library_tab.Outside(pickers_out, ask.mem_line, poll_key),
                         poll_in)
        demo.load(bind(s, refresh, lib), None, lib.listing_outputs, api_name="library")
        demo.load(bind(s, poll, lib), poll_in, lib.poll_outputs, api_visibility="private",
                  show_progress="hidden")
        timer.tick(bind(s, poll, lib), poll_in, lib.poll_outputs, api_visibility="private",
                   show_progress="hidden", concurrency_id="poll", concurrency_limit=4)
        ask_tab.wire(s, ask)
        gr.api(bind(s, node_api), api_name="node")
        mcp_tools.wire(s)  # the documented API: the MCP tools
        compare_tab.wire(s, cmp)
        evaluation_tab.wire(s, evl)
        if s.examples:
            example_questions.wire(s, demo, hint, pickers_out, ask.inputs.doc)
    mcp_tools.keep_page_endpoints_off_mcp(demo)  # documented for HTTP clients, not MCP tools
    s.writer.resume_incomplete()  # memories interrupted by a crash or a restart
    if s.examples:
        s.examples.start()  # the example manual, indexed in the background if missing
    return demo
