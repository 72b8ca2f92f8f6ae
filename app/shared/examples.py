"""The example manual and its example questions: what a visitor can try at once (issue 26).

The app ships one small real manual (``app/shared/example_manual/``: the etoolbox manual, LPPL 1.3c,
40 pages; its README says where it comes from). When the app starts (``build_app(...,
examples=True)``, which ``manual-explorer`` and ``app.py`` do unless ``H2MT_EXAMPLES=0``), a
background thread indexes it the way an upload does: ``engine.ingest.ingest_file`` phase one
(tree and text evidence; it reuses the stored document when the library has it), then its
memories are queued on the app's background memory writer. Text and route modes work as soon as
phase one is stored; memories follow.

The page says in one line what to do (``hint``), and while the example manual is being indexed
it says that, with its progress (a timer polls it, then stops). The example questions are a
``gr.Examples`` right under the question box: a click fills the question, picks the example
manual and asks it (the Ask button's own click, so the same validation, streaming and views).

Chosen where the issue is silent: a click also asks (a Space visitor expects an answer from one
click); a click before the manual is indexed fills the question and says how far indexing is,
without asking; the example is indexed again on a later start if someone deleted it (turn
examples off with ``H2MT_EXAMPLES=0`` to keep it out).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from app.shared.binding import bind
from app.shared.memory_writer import MemoryWriter
from app.shared.state import AppState, pickers
from app.shared.uploads import UploadRejected, check_upload
from app.shared.user_errors import internal_error
from engine.document.tree import DocumentError
from engine.ingest import file_sha256, ingest_file
from engine.runtime import Runtime
from storage.errors import StorageError

log = logging.getLogger(__name__)

EXAMPLE_FILE = Path(__file__).resolve().parent / "example_manual" / "etoolbox-manual.pdf"
EXAMPLE_NAME = "etoolbox, a LaTeX package's manual of 40 pages"
# Questions this manual answers: each one's quote (quote mode, and the quote above a text
# answer) is the manual's own answer, and the text answer names the command for the first three
# (checked on a fresh library; docs/results.md, "Examples, first answer from an empty data folder
# (issue 26)", which also lists the one dropped).
QUESTIONS = [
    "How do I append code to a macro?",
    "How do I loop over a comma-separated list?",
    "How do I patch a command?",
    "How do I define a new boolean flag?",
    "How do I test whether a macro is defined?",
]
POLL_S = 1.0  # how often a page asks how far the example's indexing is (only while it runs)

# The Ask button's own click: the example question is asked exactly as if typed (validation,
# clearing the last answer's views, streaming, evidence), whatever ask_tab wires to it.
ASK_JS = "(go) => { if (go) document.querySelector('#ask-button')?.click(); }"


@dataclass(frozen=True)
class ExampleStatus:
    """Where the example manual is: "indexing" (``done``/``total`` nodes of ``stage``),
    "ready" (``doc_id``), "failed" (``error``) or "off" (not started)."""
    state: str
    doc_id: int | None = None
    stage: str = ""
    done: int = 0
    total: int = 0
    error: str = ""


class ExampleManual:
    """Indexes the shipped example manual once per runtime, in a background thread (phase one
    through ``ingest_file``, the upload's path; phase two on the memory writer)."""

    def __init__(self, rt: Runtime, writer: MemoryWriter, path: Path = EXAMPLE_FILE):
        self.rt, self.writer, self.path = rt, writer, path
        self._lock = threading.Lock()
        self._status = ExampleStatus("off")
        self._thread: threading.Thread | None = None
        self._sha = ""

    def start(self) -> None:
        """Start indexing in the background (once; later calls do nothing)."""
        with self._lock:
            if self._thread is not None:
                return
            self._status = ExampleStatus("indexing", stage="starting")
            self._thread = threading.Thread(target=self._run, name="example-manual",
                                            daemon=True)
            self._thread.start()

    def join(self, timeout: float | None = None) -> ExampleStatus:
        if self._thread is not None:
            self._thread.join(timeout)
        return self.status()

    def status(self) -> ExampleStatus:
        """The status; a ready example deleted since is "failed" (deleted)."""
        with self._lock:
            st = self._status
        if st.state == "ready" and self.rt.library.find_by_sha256(self._sha) is None:
            return ExampleStatus("failed", error="the example manual was deleted from the "
                                 "library (it is indexed again on the next start)")
        return st

    def indexing(self, sha256: str) -> bool:
        """Whether the document of this sha256 is the example manual while it is being indexed
        (stored, its memories not queued yet: they will be)."""
        return bool(self._sha) and sha256 == self._sha and self.status().state == "indexing"

    def _report(self, done: int, total: int, *, stage: str) -> None:
        with self._lock:
            self._status = ExampleStatus("indexing", stage=stage, done=done, total=total)

    def _run(self) -> None:
        try:
            check_upload(self.path, self.rt.settings)  # the upload's checks: same limits
            self._sha = file_sha256(self.path)
            with self._lock:
                self._status = ExampleStatus("indexing", stage="parsing")
            r = ingest_file(self.path, self.rt, self._report, memories=False, background=True,
                            timeout_s=self.rt.settings.request_timeout_s, preflighted=True)
        except (UploadRejected, DocumentError, StorageError) as e:  # a broken install (the
            # file missing), a full disk, a database refusing: the page says it in one line
            log.warning("the example manual %s could not be indexed: %s", self.path.name, e)
            return self._fail(str(e))
        except Exception:  # noqa: BLE001 - a bug: the traceback goes to the log, the app
            # runs on without its example, and the page says so
            return self._fail(internal_error(f"Indexing the example manual {self.path.name}"))
        if r.memories == "pending":
            self.writer.submit(r.doc_id)
        log.info("example manual %s %s as #%d", self.path.name,
                 "already in the library" if r.reused else "indexed", r.doc_id)
        with self._lock:
            self._status = ExampleStatus("ready", doc_id=r.doc_id)


    def _fail(self, why: str) -> None:
        with self._lock:
            self._status = ExampleStatus("failed", error=" ".join(why.split())[:200])


def example_manual(rt: Runtime, writer: MemoryWriter) -> ExampleManual:
    """The runtime's one example indexer (two apps over one runtime share it)."""
    ex = rt.cache.get("example_manual")
    if ex is None:
        ex = rt.cache["example_manual"] = ExampleManual(rt, writer)
    return ex


# -- the page ------------------------------------------------------------------------------------

def hint(st: ExampleStatus) -> str:
    """The first page's one line: what to do, or how far the example manual's indexing is."""
    if st.state == "ready":
        return (f"**Try it:** pick an example question below (they ask {EXAMPLE_NAME}), "
                "or upload your own manual in the Library tab.")
    if st.state in ("indexing", "off"):  # "off": the page built before indexing started
        how = (f"{st.stage} {st.done}/{st.total} nodes" if st.done
               else f"{st.stage} of {st.total} nodes" if st.total
               else st.stage or "starting")
        return (f"**The example manual is being indexed** ({EXAMPLE_NAME}; {how}): its "
                "questions below can be asked in a few seconds. Or upload your own manual in "
                "the Library tab.")
    why = f" ({st.error})" if st.error else ""
    return (f"**Upload a manual in the Library tab**, then ask it questions here (the example "
            f"manual is not available{why}).")


def build_hint(s: AppState) -> gr.Markdown:
    """The one line under the page's title."""
    return gr.Markdown(hint(s.examples.status()), elem_id="start-hint")


def build(s: AppState, doc: gr.Dropdown, question: gr.Textbox) -> gr.Examples | None:
    """The example questions (under the question box) and their click: fill the question, pick
    the example manual, ask. None when the app has no examples."""
    if s.examples is None:
        return None
    go = gr.Checkbox(False, visible=False, elem_id="example-go")
    ex = gr.Examples([[q] for q in QUESTIONS], inputs=[question],
                     label="Example questions (click one to ask it)",
                     elem_id="example-questions", api_visibility="private")
    ex.load_input_event.then(bind(s, pick_example), None, [doc, go], queue=False,
                             api_visibility="private", show_progress="hidden").then(
        None, go, None, js=ASK_JS, queue=False, api_visibility="private",
        show_progress="hidden")
    return ex


def pick_example(s: AppState):
    """The example manual in the Ask tab's picker, and whether to ask now (it is indexed)."""
    st = s.examples.status()
    if st.state != "ready":
        gr.Warning(hint(st).replace("**", ""))
        return gr.skip(), False
    _, ask_picker, _ = pickers(s, str(st.doc_id))
    return ask_picker, True


def poll(s: AppState, prev: str, ask_doc):
    """Timer tick while the example is being indexed: the hint (when changed); the three
    pickers once it is stored (so it can be picked); the timer stops when it is ready or
    failed. ``prev``: the last tick's "state|hint" of this page."""
    st = s.examples.status()
    line = hint(st)
    key = f"{st.state}|{line}"
    if key == prev:
        return (gr.skip(),) * 6
    running = st.state in ("indexing", "off")
    was_running = prev.split("|")[0] in ("indexing", "off")
    picks = (pickers(s, ask_doc if ask_doc not in (None, "") else str(st.doc_id))
             if st.state == "ready" and was_running else (gr.skip(),) * 3)
    return line, gr.Timer(active=running), *picks, key


def wire(s: AppState, demo: gr.Blocks, hint_md: gr.Markdown, pickers_out: list,
         ask_doc: gr.Dropdown) -> None:
    """The hint's timer (runs while the example is being indexed) and its first value."""
    timer = gr.Timer(POLL_S)
    prev = gr.State("")
    args = dict(fn=bind(s, poll), inputs=[prev, ask_doc],
                outputs=[hint_md, timer, *pickers_out, prev], api_visibility="private",
                show_progress="hidden", queue=False)
    demo.load(**args)
    timer.tick(**args)
