"""The manual explorer in the browser: library, ask (with the routing tree) and compare.

Layout and thin handlers only: every handler calls the engine (ingest, ask) or the library and
turns the result into component values. Figures live in app/figures.py, the tree layout in
app/layout.py. The engine never imports anything from here.

Node selection: gr.Plot has no click events, so every view that shows nodes also shows them in
a table (gr.Dataframe); selecting a row opens that node's text and pages.

Indexing in two phases (engine/ingest.py): an upload runs phase one only (tree and routing
evidence, stored in one transaction), so the manual can be asked in text and route modes as soon
as the upload returns. Phase two (the node memories) runs in the background: one MemoryWriter
thread per app takes documents from a queue, one at a time, so no document ever has two writers
here. The library shows "memories n/N" while a document waits or is written (a gr.Timer polls
the library's one-COUNT progress every few seconds) and "ready" once done. At start, documents
whose memories are incomplete under the runtime's fingerprint are queued again: an interrupted
write resumes where it stopped. Memory mode (and the memory router) on a document still being
written says so in a notice and leaves the other outputs as they were.

Model use: indexing, the background memory writer and answers of every mode share the one
backbone and run side by side. The ArcAligner's slot context is thread-local and its attachment
reference-counted (engine/aligner.py), so an answer that arms memory slots cannot leak them into
a concurrent forward of the writer or of another answer. Queues: indexing has its own queue (one
file at a time), answers theirs (a few at a time), so a long ingest never holds questions back.

Answers stream (do_ask is a generator over engine.ask.ask_stream, and so is the /ask API: a
gradio_client ``submit`` sees every step): the routing tree, its tables and the sections to be
read appear as soon as routing ends, then the answer token by token, then the final answer with
its metrics, history and evidence lines. The /ask outputs keep their shape; the evidence lines,
``degenerate`` and ``cut`` travel in the summary JSON, and to the page in the view State (shown by
the ``.then`` step). An output the engine labels degenerate is not shown as an answer: a notice
gives the engine's warning and the output, and a button asks the same question in text mode.

Page view (app/pages.py): selecting a cited node or an evidence line renders that section's PDF
page(s) from the file stored with the document, the evidence sentences highlighted (a sentence
over a page break on both pages); Markdown, HTML and text manuals show the section's text with
the sentences marked. Documents stored before files were kept show their text until the file is
uploaded again.

Bad input: every file is checked (app/uploads.py, the engine's limits from Settings) and then
built by the engine; whatever is wrong with it comes back as one line in the indexing status, and
nothing of it is stored. Titles and text from manuals are shown as text, never as markup.
"""
from __future__ import annotations

import contextlib
import html
import io
import logging
import queue
import re
import threading
from dataclasses import asdict
from itertools import chain
from pathlib import Path

import gradio as gr
import plotly.graph_objects as go

from app.figures import (AGREEMENT_COLUMNS, CHANNEL_COLUMNS, ROUTE_COLUMNS, agreement_rows,
                         agreement_summary, figure_summary, manual_figure, pages_label,
                         route_figure, route_rows, router_agreement, single_channel,
                         single_channel_reason)
from app.pages import Line, page_view
from app.quote_view import quote_markdown
from app.uploads import ALLOWED_EXTS, UploadRejected, check_upload
from engine.memory.aggregate import POLICIES
from engine.answer.events import AnswerReady, RouteReady, TokenChunk
from engine.answer.modes import MODES
from engine.ask import AskError, AskOptions, ask, ask_stream
from engine.ask import MemoriesPending as MemoriesNotWritten
from engine.ingest import ingest_file, write_document_memories
from engine.routing.channels import LABELS
from engine.routing.fused import ROUTERS
from engine.routing.router import Route
from engine.runtime import Runtime
from engine.document.tree import DocumentError
from storage.errors import DocumentNotFound, MissingMemories, StaleMemories, StorageError

log = logging.getLogger(__name__)

ANSWER_CONCURRENCY = 2  # answers generated at once (indexing has its own queue of one)
MEMORY_POLL_S = 3.0  # how often the page asks how far the background memory writer is
# route table columns (ROUTE_COLUMNS): status, title, pages, depth, score, three channels, prob,
# gate loops, doc, node, id
ROUTE_WIDTHS = ["7%", "23%", "7%", "5%", "7%", "10%", "7%", "7%", "6%", "7%", "4%", "5%", "5%"]

LIBRARY_COLUMNS = ["id", "title", "file", "pages", "nodes", "depth", "tree source", "memories",
                   "ingest s", "added (UTC)"]
OUTLINE_COLUMNS = ["node", "title", "pages", "tokens", "kind"]
CITED_COLUMNS = ["#", "title", "pages", "doc", "node"]
EVIDENCE_COLUMNS = ["#", "score", "page", "section", "sentence", "doc", "node"]
DEGENERATE_REASONS = {"repeat": "it repeats itself", "markup": "it is markup debris",
                      "empty": "it is empty"}
SOURCE_CACHE = 4  # source files (PDF bytes) kept in memory for the page view
HISTORY_COLUMNS = ["query", "asked (UTC)", "mode", "question", "answer", "TTFT ms", "selected"]
# The history table lists this many of a manual's newest questions: every answer refreshes it,
# so reading a long log whole there would cost time and memory growing with the log.
HISTORY_ROWS = 50
ALL = "all"
MODE_HELP = {
    "text": "answers from the selected sections' text, with pages (the default)",
    "memory": "fast: answers from the sections' memory vectors (H2MT), less reliable",
    "full": "reads the manual from the start, as much as fits (no routing)",
    "flat": "baseline: fixed-length pieces, one memory each, no tree",
    "route": "only finds the sections, no answer",
    "quote": "only the manual's best passage, in its own words (no answer written)",
}
assert set(MODE_HELP) == set(MODES), "every answer mode needs its help line"
# An answer's metrics as the page shows them (key of engine.answer.modes.Metrics, label, unit).
METRIC_LABELS = [("ttft_ms", "time to first token (TTFT)", "ms"), ("total_ms", "total", "ms"),
                 ("route_ms", "routing", "ms"), ("quote_ms", "finding the quote", "ms"),
                 ("evidence_ms", "evidence lines", "ms"),
                 ("prefill_tokens", "prefill tokens (the prompt)", ""),
                 ("generated_tokens", "generated tokens", ""),
                 ("peak_mem_mb", "memory added at peak", "")]
ROUTER_LABELS = {"fused": "fused (all evidence combined)", "memory": f"{LABELS['memory']} alone",
                 "lexical": f"{LABELS['lexical']} alone", "dense": f"{LABELS['dense']} alone"}
ROUTER_CHOICES = [(ROUTER_LABELS.get(r, r), r) for r in ROUTERS]
READY = "ready"


def gpu(fn):
    """``spaces.GPU`` on a Hugging Face ZeroGPU Space; a no-op anywhere else."""
    try:
        import spaces  # noqa: PLC0415
    except ImportError:
        return fn
    return spaces.GPU(fn)


# -- small helpers -------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|>~])")


def md_text(text: str) -> str:
    """User/manual text shown inside Markdown: HTML escaped and Markdown syntax neutralised."""
    return _MD_SPECIAL.sub(r"\\\1", html.escape(" ".join((text or "").split()), quote=False))


def empty_figure(message: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=html.escape(message), showarrow=False, x=0.5, y=0.5,
                       xref="paper", yref="paper", font=dict(size=14, color="#6b7280"))
    fig.update_layout(height=220, xaxis=dict(visible=False), yaxis=dict(visible=False),
                      plot_bgcolor="white", paper_bgcolor="white",
                      margin=dict(l=10, r=10, t=10, b=10))
    return fig


def _opt_int(x) -> int | None:
    """Number inputs: blank or 0 mean "no limit"."""
    if x is None or x == "":
        return None
    v = int(float(x))
    return v if v > 0 else None


def _doc_arg(doc) -> int | str:
    if doc in (None, "", ALL):
        if doc in (None, ""):
            raise gr.Error("Choose a manual first (upload one in the Library tab).")
        return ALL
    try:
        return int(doc)
    except (TypeError, ValueError):
        raise gr.Error(f"not a manual id: {doc!r}") from None


class MemoriesPending(Exception):
    """The request needs memories that are still being written (the engine's one-line message)."""


class _Cancelled(Exception):
    """Raised inside the memory writer's progress callback to stop writing a deleted document."""


class MemoryWriter:
    """Phase two of ingest in the background: one daemon thread takes document ids from a queue
    and writes their node memories (``write_document_memories``: resumable, one tree height
    stored at a time), one document at a time. A document is queued at most once; ``cancel``
    stops the write of a document that is about to be deleted (checked between batches)."""

    def __init__(self, rt: Runtime, write=write_document_memories):
        self.rt = rt
        self._write = write
        self._queue: queue.Queue[int] = queue.Queue()
        self._cond = threading.Condition()
        self._waiting: set[int] = set()  # queued, not started
        self._current: int | None = None
        self._live: tuple[int, int] | None = None  # (done, total) of the current document
        self._cancel: int | None = None
        self._failed: dict[int, str] = {}
        self._thread: threading.Thread | None = None

    def submit(self, doc_id: int) -> bool:
        """Queue ``doc_id`` unless it is already waiting or being written; True if queued."""
        with self._cond:
            if doc_id in self._waiting or doc_id == self._current:
                return False
            self._waiting.add(doc_id)
            self._failed.pop(doc_id, None)
            self._queue.put(doc_id)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="memory-writer",
                                                daemon=True)
                self._thread.start()
            return True

    def resume_incomplete(self) -> list[int]:
        """Queue every document whose memories are incomplete under the runtime's fingerprint
        (an upload whose phase two was interrupted by a crash or a restart)."""
        lib, fp = self.rt.library, self.rt.fingerprint
        queued = []
        for d in lib.list_documents():
            try:
                incomplete = not lib.memory_progress(d.id, fp).complete
            except DocumentNotFound:
                continue
            if incomplete and self.submit(d.id):
                queued.append(d.id)
        if queued:
            log.info("writing the missing memories of %d document(s) in the background: %s",
                     len(queued), queued)
        return queued

    def cancel(self, doc_id: int, wait_s: float = 120.0) -> None:
        """Forget ``doc_id``; if it is being written, stop at the next batch and wait for that."""
        with self._cond:
            self._waiting.discard(doc_id)
            self._failed.pop(doc_id, None)
            if self._current != doc_id:
                return
            self._cancel = doc_id
            self._cond.wait_for(lambda: self._current != doc_id, timeout=wait_s)

    def state(self, doc_id: int) -> tuple[str, tuple[int, int] | None]:
        """("writing", (done, total) so far) | ("queued", None) | ("failed", None) | ("", None)."""
        with self._cond:
            if self._current == doc_id:
                return "writing", self._live
            if doc_id in self._waiting:
                return "queued", None
            if doc_id in self._failed:
                return "failed", None
            return "", None

    def failure(self, doc_id: int) -> str | None:
        with self._cond:
            return self._failed.get(doc_id)

    def busy(self) -> bool:
        with self._cond:
            return self._current is not None or bool(self._waiting)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is queued or being written (True), or ``timeout`` passes."""
        with self._cond:
            return self._cond.wait_for(lambda: self._current is None and not self._waiting,
                                       timeout=timeout)

    def _progress(self, done: int, total: int, *, stage: str = "memories") -> None:
        with self._cond:
            if self._cancel is not None and self._cancel == self._current:
                raise _Cancelled()
            self._live = (done, total)

    def _run(self) -> None:
        while True:
            doc_id = self._queue.get()
            with self._cond:
                if doc_id not in self._waiting:  # cancelled (deleted) while it waited
                    continue
                self._waiting.discard(doc_id)
                self._current, self._live, self._cancel = doc_id, None, None
            try:
                self._write(doc_id, self.rt, self._progress)
            except (_Cancelled, DocumentNotFound):
                pass  # deleted meanwhile: nothing left to write
            except Exception as e:  # noqa: BLE001 - keep the thread alive; the library says it
                log.exception("writing the memories of document %s failed", doc_id)
                with self._cond:
                    self._failed[doc_id] = f"{type(e).__name__}: {e}"[:200]
            finally:
                with self._cond:
                    self._current, self._live, self._cancel = None, None, None
                    self._cond.notify_all()


def memory_writer(rt: Runtime) -> MemoryWriter:
    """The runtime's one background memory writer (created on first use): two apps built over
    the same runtime share it, so a document never gets two writers in one process."""
    writer = rt.cache.get("memory_writer")
    if writer is None:
        writer = rt.cache["memory_writer"] = MemoryWriter(rt)
    return writer


def route_from_log(records: list[dict], settings: dict | None) -> Route:
    """A Route rebuilt from the query log (what ask() logged), for history views."""
    s = settings or {}
    return Route.from_records(records, k=int(s.get("k", 0) or 0), max_depth=s.get("max_depth"),
                              budget=s.get("budget"), temperature=float(s.get("temperature", 1.0)),
                              router=s.get("router") or "memory")  # older logs: memory-routed


# -- the app -------------------------------------------------------------------------------------

def build_app(rt: Runtime, *, max_file_mb: float | None = None, max_pages: int | None = None
              ) -> gr.Blocks:
    """The app over ``rt``; limits come from ``rt.settings`` (the keywords override two)."""
    settings = rt.settings.with_(max_upload_mb=max_file_mb, max_pages=max_pages)
    max_file_mb, max_pages = settings.max_upload_mb, settings.max_pages
    trees: dict[int, object] = {}  # doc_id -> Tree, for the node views

    def tree_of(doc_id: int):
        if doc_id not in trees:
            trees[doc_id] = rt.library.get_tree(doc_id)
        return trees[doc_id]

    sources: dict[int, tuple[str, object]] = {}  # doc_id -> (sha256, SourceFile | None)

    def source_of(doc_id: int):
        """The document's stored file (None when stored without it), a few kept in memory."""
        sha = rt.library.get_document(doc_id).sha256
        hit = sources.get(doc_id)
        if hit is None or hit[0] != sha:
            while len(sources) >= SOURCE_CACHE:
                sources.pop(next(iter(sources)))
            hit = sources[doc_id] = (sha, rt.library.get_source(doc_id))
        return hit[1]

    def forget(doc_id: int) -> None:
        """Drop every cached view of a deleted document (SQLite may reuse its id)."""
        trees.pop(doc_id, None)
        sources.pop(doc_id, None)
        for name in ("docs", "flat"):
            cache = rt.cache.get(name, {})
            for key in [k for k in cache if k[0] == doc_id]:
                cache.pop(key, None)

    # -- background memories -----------------------------------------------------------------
    writer = memory_writer(rt)
    complete: set[tuple[int, str]] = set()  # (doc id, sha256): every memory written

    def memory_label(d) -> str:
        """"ready", or "memories n/N" (and why it waits) of a listed document's memories under
        the runtime's fingerprint: one COUNT query until it is ready, none after."""
        key = (d.id, d.sha256)
        if key in complete:
            return READY
        try:
            p = rt.library.memory_progress(d.id, rt.fingerprint)
        except DocumentNotFound:
            return "deleted"
        if p.complete:
            complete.add(key)
            return READY
        state, live = writer.state(d.id)
        done = max(p.done, live[0]) if live and live[1] == p.total else p.done
        label = f"memories {done}/{p.total}"
        if state == "queued":
            label += " (queued)"
        elif state == "failed":
            label += " (failed: upload the file again)"
        elif state != "writing":
            label += " (not being written)"
        return label

    def pending_list(labels: dict[int, str]) -> str:
        """"#3: 40/120, #4: 0/80 (queued)" of the documents whose memories are not ready."""
        return ", ".join(f"#{i}: {lab.removeprefix('memories ')}"
                         for i, lab in labels.items() if lab != READY)

    def library_line(labels: dict[int, str]) -> str:
        """The Library tab's line about memories still being written (empty when none)."""
        what = pending_list(labels)
        if not what:
            return ""
        return (f"**Memories are being written in the background** ({what}). These manuals "
                "can be asked now in text and route modes; memory mode, the flat baseline and "
                "the memory router wait for their memories.")

    def doc_memory_line(doc, labels: dict[int, str] | None = None) -> str:
        """The Ask tab's line about the chosen manual's memories (empty when they are ready)."""
        if doc in (None, ""):
            return ""
        try:
            if labels is None:
                docs = (rt.library.list_documents() if doc == ALL
                        else [rt.library.get_document(int(doc))])
                labels = {d.id: memory_label(d) for d in docs}
            elif doc != ALL:
                labels = {int(doc): labels.get(int(doc), READY)}
        except (DocumentNotFound, TypeError, ValueError):
            return ""
        what = pending_list(labels)
        if not what:
            return ""
        return (f"Memories are still being written ({what}): ask in text or route mode now "
                "(fused routing uses words and meaning until they are done); memory mode and "
                "the memory router wait for them.")

    def pending_unavailable(doc) -> str:
        """Why the memory router's selection is missing, for the disagreement view."""
        try:
            ids = ([d.id for d in rt.library.list_documents()] if doc == ALL else [int(doc)])
            done = total = 0
            for i in ids:
                p = rt.library.memory_progress(i, rt.fingerprint)
                done, total = done + p.done, total + p.total
        except (DocumentNotFound, TypeError, ValueError):
            return "memory router not available"
        if done < total:
            return f"memory router not available yet (memories being written {done}/{total})"
        return "memory router not available for this route"

    # -- library ---------------------------------------------------------------------------
    def library_rows(docs=None, labels: dict[int, str] | None = None) -> list[list]:
        docs = rt.library.list_documents() if docs is None else docs
        labels = {d.id: memory_label(d) for d in docs} if labels is None else labels
        return [[d.id, d.title, d.file_name, d.pages, d.n_nodes, d.depth, d.tree_source,
                 labels[d.id], round((d.tree_ms + d.memory_ms) / 1e3, 1),
                 d.created_at.strftime("%Y-%m-%d %H:%M")]
                for d in docs]

    def poll(prev_key, ask_doc_value):
        """Timer tick: the library rows and memory lines, or nothing when unchanged (one
        listing and one COUNT per document still being written)."""
        docs = rt.library.list_documents()
        labels = {d.id: memory_label(d) for d in docs}
        rows = library_rows(docs, labels)
        lib_line, ask_line = library_line(labels), doc_memory_line(ask_doc_value, labels)
        key = repr((rows, lib_line, ask_line))
        if key == prev_key:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return rows, lib_line, ask_line, key

    def doc_choices(with_all: bool) -> list[tuple[str, str]]:
        docs = rt.library.list_documents()
        out = [(f"#{d.id} {d.title} ({d.n_nodes} nodes)", str(d.id)) for d in docs]
        if with_all and len(docs) > 1:
            out.append(("All manuals (library-wide routing)", ALL))
        return out

    def pickers(value: str | None):
        """Updates for the three manual pickers (library, ask, compare)."""
        lib, asks = doc_choices(False), doc_choices(True)
        ids = {v for _, v in asks}
        v = value if value in ids else (lib[-1][1] if lib else None)
        return (gr.update(choices=lib, value=v), gr.update(choices=asks, value=v),
                gr.update(choices=asks, value=v))

    @gpu
    def upload(files, progress=gr.Progress()):
        paths = [Path(f) for f in (files or [])]
        messages, last = [], None
        n = len(paths)
        for i, path in enumerate(paths):
            name = path.name
            try:
                check_upload(path, settings)
            except UploadRejected as e:
                messages.append(f"✗ {e}")
                continue

            def report(done: int, total: int, *, stage: str, i=i, name=name) -> None:
                progress((i + 0.1 + 0.85 * done / max(total, 1)) / n,
                         desc=f"{of}{name}: {stage} {done}/{total} nodes")

            of = f"file {i + 1} of {n}: " if n > 1 else ""
            progress(i / n, desc=f"{of}{name}: parsing and building the tree")
            try:
                r = ingest_file(path, rt, report, timeout_s=settings.request_timeout_s,
                                memories=False)
            except DocumentError as e:
                msg = str(e)
                messages.append(f"✗ {msg if msg.startswith(name) else f'{name}: {msg}'}")
                continue
            except StorageError as e:
                messages.append(f"✗ {name}: not stored ({e})")
                continue
            except Exception as e:  # a bug, not the user's file: say so, keep the other files
                log.exception("ingest of %s failed", name)
                messages.append(f"✗ {name}: could not be indexed (internal error "
                                f"{type(e).__name__}); nothing was stored")
                continue
            progress((i + 1) / n, desc=f"{name}: stored")
            if not r.reused:
                forget(r.doc_id)
            last = str(r.doc_id)
            verb = "already in the library" if r.reused else "indexed"
            line = (f"✓ {name} {verb} as #{r.doc_id}: {r.nodes} nodes ({r.leaves} leaves), "
                    f"depth {r.depth}, {r.pages} pages, tree from {r.source}")
            if not r.reused:
                line += f" (tree {r.tree_ms / 1e3:.1f} s, evidence {r.evidence_ms / 1e3:.1f} s)"
            if r.memories == "pending":
                writer.submit(r.doc_id)
                line += (". Ask it now in text or route mode; its memories are being written "
                         "in the background (memory mode and the memory router wait for them).")
            else:
                line += ". Memories ready: every mode and router can be used."
            messages.append(line)
        msg = "\n".join(messages) or "No file chosen."
        return (msg, library_rows(), *pickers(last))

    def refresh(current=None):
        return (library_rows(), *pickers(current))

    def outline(doc):
        if doc in (None, "", ALL):
            return [], "", ""
        try:
            tree = tree_of(_doc_arg(doc))
        except DocumentNotFound:
            raise gr.Error(f"no manual with id {doc}") from None
        labels = tree.labels()
        rows = [[n.id, ("\u00a0\u00a0\u00a0" * n.depth) + labels[n.id],
                 pages_label(n.page_start, n.page_end), n.tokens, n.kind]
                for n in tree.preorder()]
        return rows, "Select a row of the outline to read that node.", ""

    def node_view(doc_id, node_id):
        """Header (Markdown) and text of one stored node."""
        try:
            tree = tree_of(int(doc_id))
            n = tree.node(int(node_id))
        except (DocumentNotFound, KeyError, TypeError, ValueError):
            return "That node is not in the library any more.", ""
        labels = tree.labels()
        path = " › ".join(md_text(labels[p.id]) for p in tree.path(n.id)[1:-1])
        title = md_text(labels[n.id])
        head = (f"**{title}** — {pages_label(n.page_start, n.page_end)}, depth {n.depth}, "
                f"{n.tokens} tokens, node {n.id} of manual #{int(doc_id)}")
        if path:
            head += f"  \nin: {path}"
        return head, n.text or "(this node has only its heading; its text is in its children)"

    def outline_select(doc, evt: gr.SelectData):
        row = evt.row_value or []
        if not row or doc in (None, "", ALL):
            return "", ""
        return node_view(int(doc), row[0])

    def library_select(evt: gr.SelectData):
        row = evt.row_value or []
        return str(row[0]) if row else gr.update()

    def node_api(doc_id: int, node_id: int) -> tuple[str, str]:
        """A stored node's header (Markdown) and text."""
        return node_view(doc_id, node_id)

    def delete(doc):
        if doc in (None, "", ALL):
            raise gr.Error("Choose a manual to delete.")
        doc = _doc_arg(doc)
        try:
            rt.library.get_document(doc)
        except DocumentNotFound:
            raise gr.Error(f"no manual with id {doc}") from None
        writer.cancel(doc)  # a document is never deleted under its memory writer
        try:
            rt.library.delete_document(doc)
        except DocumentNotFound:
            raise gr.Error(f"no manual with id {doc}") from None
        forget(doc)
        return (f"Deleted manual #{doc} (its logged questions stay, without a manual).",
                library_rows(), *pickers(None), [], "", "")

    # -- ask -------------------------------------------------------------------------------
    def options(mode, k, max_depth, budget, gate, hier_pos, max_new_tokens,
                router=None) -> AskOptions:
        return AskOptions(mode=mode or "text", k=int(k or 3), max_depth=_opt_int(max_depth),
                          budget=_opt_int(budget), gate=bool(gate), hier_pos=bool(hier_pos),
                          max_new_tokens=int(max_new_tokens or 64),
                          router=router or settings.router)

    @contextlib.contextmanager
    def user_errors():
        """The engine's errors about a request as the page shows them: MemoriesPending (a
        notice, not an error) when it needs memories still being written, else gr.Error."""
        try:
            yield
        except AskError as e:
            if isinstance(e, MemoriesNotWritten):
                raise MemoriesPending(str(e)) from None
            raise gr.Error(str(e)) from None
        except (StaleMemories, MissingMemories):
            raise gr.Error("This manual's memories were written by another model or "
                           "aggregation policy: upload the file again to rewrite them.") from None
        except StorageError as e:
            raise gr.Error(str(e)) from None
        except Exception as e:  # a bug or a failing model: this request fails, the app stays up
            log.exception("answering failed")  # the traceback goes to the server's log
            raise gr.Error(f"Answering failed ({type(e).__name__}: {e}). The app is still "
                           "running: ask again, or report this with the server's log.") from None

    @gpu
    def run_ask(doc, question, opts: AskOptions):
        """The engine's Answer (errors as ``user_errors`` says)."""
        target = _doc_arg(doc)
        with user_errors():
            return ask(rt, target, question, opts)

    @gpu
    def run_ask_stream(doc, question, opts: AskOptions):
        """``run_ask`` as the engine's events (RouteReady, TokenChunk..., AnswerReady), with the
        same errors; they can only come before the first event."""
        target = _doc_arg(doc)
        with user_errors():
            yield from ask_stream(rt, target, question, opts)

    def metrics_md(a) -> str:
        rows = [("mode", a.mode), *metric_rows(asdict(a.metrics))]
        if getattr(a, "cut", False):
            rows.append(("cut", f"at {a.cut_at} tokens (the max new tokens limit)"))
        if a.route is not None:
            rows.insert(1, ("selected nodes", f"{len(a.route.selected)} (stop: {a.route.stop_reason})"))
            rows.insert(1, ("router", ROUTER_LABELS.get(a.route.router, a.route.router)))
        return "| metric | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)

    def metric_rows(m: dict) -> list[tuple[str, object]]:
        """(label, value) rows of an answer's metrics in plain words (a live answer's or a logged
        one's: the same labels)."""
        rows = []
        for key, label, unit in METRIC_LABELS:
            v = m.get(key)
            if v is None or (key == "evidence_ms" and not v):
                continue
            if key == "peak_mem_mb":  # growth over the process's size at the request's start
                rows.append((label, "under 1 MB" if v < 1 else f"{v:.0f} MB"))
            else:
                rows.append((label, f"{v:.0f} {unit}" if unit else v))
        return rows

    def cited_rows(cited) -> list[list]:
        """Rows of the cited table from an Answer or a list of Citations."""
        cited = getattr(cited, "cited", cited)
        return [[i + 1, c.title or "(untitled)", pages_label(c.page_start, c.page_end), c.doc_id,
                 c.node_id] for i, c in enumerate(cited)]

    def figures(a, doc=None):
        """Routing tree, icicle, route rows, summary JSON and the disagreement view of ``a``."""
        return route_views(a.route, a, doc, a.mode, [c.id for c in a.cited], a.warning)

    def route_views(route, a, doc, mode: str, cited: list[int], warning: str | None):
        """The views of a route: of a finished answer ``a``, or (``a`` None) of a route whose
        answer is still being generated (no gate loops yet)."""
        if route is None:
            msg = f"The {mode} mode does not route: no tree to show."
            view = {"agreement": f"The {mode} mode does not route: nothing to compare.",
                    "agreement_rows": []}
            return (empty_figure(msg), empty_figure(msg), [],
                    {"mode": mode, "route": None, "warning": warning}, view)
        fig = route_figure(route, a)
        agreement = router_agreement(route)
        summary = figure_summary(fig)
        summary.update(mode=mode, router=route.router, selected=list(route.selected),
                       cited=list(cited), warning=warning,
                       alternatives={k: list(v) for k, v in route.alternatives.items()},
                       agreement=agreement.counts() if agreement else None)
        why = ("" if agreement else single_channel_reason(route) if single_channel(route)
               else pending_unavailable(doc))
        view = {"agreement": agreement_summary(agreement, why),
                "agreement_rows": agreement_rows(route, agreement)}
        return fig, manual_figure(route), route_rows(route, a), summary, view

    def history_rows(doc) -> list[list]:
        if doc in (None, "", ALL):
            return []
        try:  # the picker takes typed values: not an id, no history
            doc_id = int(doc)
        except (TypeError, ValueError):
            return []
        rows = []
        for q in reversed(rt.library.list_queries(doc_id, newest=HISTORY_ROWS)):
            m = q.metrics or {}
            sel = sum(1 for r in (q.route or []) if r.get("status") == "selected")
            ans = " ".join((q.answer or "").split())
            rows.append([q.id, q.created_at.strftime("%Y-%m-%d %H:%M:%S"), q.mode, q.question,
                         ans if len(ans) <= 80 else ans[:79] + "…",
                         round(m.get("ttft_ms", 0) or 0), sel])
        return rows

    def do_ask(doc, question, mode, k, max_depth, budget, gate, hier_pos, max_new_tokens,
               router="fused"):
        """Streams: the routing tree, icicle, route table and the sections to be read as soon
        as routing ends, then the answer as it is generated, then the final answer, metrics,
        history and (in the view State) the evidence lines and notices."""
        opts = options(mode, k, max_depth, budget, gate, hier_pos, max_new_tokens, router)
        events = run_ask_stream(doc, question, opts)
        try:
            first = next(events)  # the request's errors come before the first event
        except MemoriesPending as e:  # a notice; the last answer and tree stay as they were
            gr.Warning(str(e))
            yield (*[gr.skip()] * 12, {"notice": str(e)})
            return
        text, quoted = "", False
        for ev in chain([first], events):
            if isinstance(ev, RouteReady):
                fig, icicle, rows, summary, view = route_views(
                    ev.route, None, doc, opts.mode, [c.id for c in ev.cited], None)
                summary["generating"] = opts.mode != "route"
                summary["quote"] = ev.quote.as_json() if ev.quote is not None else None
                quoted = ev.quote is not None or ev.not_covered
                yield ("", generating_md(opts, ev.route, ""), cited_rows(ev.cited), fig, icicle,
                       rows, summary, gr.skip(), *quote_outputs(ev.quote, ev.not_covered, opts.mode),
                       view)
            elif isinstance(ev, TokenChunk):
                text += ev.text
                yield (text, generating_md(opts, None, text), *[gr.skip()] * 11)
            elif isinstance(ev, AnswerReady):
                a = ev.answer  # a quote found after generation (memory, full, flat) comes now
                late = (gr.skip(),) * 4 if quoted else quote_outputs(a.quote, a.not_covered, a.mode)
                *out, view = final_outputs(a, doc)
                yield (*out, *late, view)

    def quote_outputs(quote, not_covered: bool, mode: str):
        """The quote block and its page with the quote highlighted (app/quote_view.py)."""
        md = quote_markdown(quote, not_covered, mode)
        if quote is None or quote.doc_id is None:
            return (gr.update(value=md, visible=bool(md)), gr.skip(), gr.skip(), gr.skip())
        page = page_outputs(quote.doc_id, quote.node_id, [Line(quote.text, quote.page, quote.score)])
        return (gr.update(value=md, visible=True), *page)

    def generating_md(opts: AskOptions, route, text: str) -> str:
        if opts.mode == "route":
            return "Routing done."
        lines = [f"**Generating the answer** ({opts.mode} mode) …"]
        if route is not None:
            lines.append(f"routed: {len(route.selected)} nodes selected "
                         f"(stop: {route.stop_reason})")
        if text:
            lines.append(f"{len(text.split())} words so far")
        return "  \n".join(lines)

    def final_outputs(a, doc):
        """The outputs of a finished answer (and its view State: notice, evidence lines)."""
        fig, icicle, rows, summary, view = figures(a, doc)
        degenerate = getattr(a, "degenerate", None)
        evidence = [asdict(e) for e in getattr(a, "evidence", None) or []]
        if degenerate:  # not presented as an answer: a notice, and the text mode offered
            why = DEGENERATE_REASONS.get(degenerate, str(degenerate))
            shown = f"(no answer: the {a.mode}-mode output is not usable, {why}; see the note)"
            raw = " ".join((a.text or "").split())
            view["notice"] = ((a.warning or "This output is not a usable answer.")
                              + (f" The model wrote: “{raw[:200]}{'…' if len(raw) > 200 else ''}”"
                                 if raw else ""))
            view["offer_text"] = a.mode != "text"
        else:
            shown = a.text if a.text else ("(routing only: no answer generated)"
                                            if a.mode == "route" else
                                            "(the model generated nothing)")
            view["notice"] = a.warning or ""
            view["offer_text"] = False
        view["evidence"] = evidence
        view["evidence_note"] = evidence_summary(a, evidence, degenerate)
        quote = getattr(a, "quote", None)
        summary.update(degenerate=degenerate, cut=getattr(a, "cut", False),
                       cut_at=getattr(a, "cut_at", None), evidence=evidence,
                       answer=a.text, quote=quote.as_json() if quote is not None else None,
                       not_covered=getattr(a, "not_covered", False))
        return (shown, metrics_md(a), cited_rows(a), fig, icicle, rows, summary,
                history_rows(doc), view)

    def evidence_summary(a, evidence: list[dict], degenerate) -> str:
        if a.mode not in ("text", "memory"):
            return f"The {a.mode} mode has no evidence lines."
        if degenerate:
            return "No evidence lines: the output is not an answer."
        if not evidence:
            return ("No sentence of the cited sections supports the answer closely enough "
                    "(below the evidence threshold): nothing is highlighted. Select a cited "
                    "section to read its page.")
        return (f"{len(evidence)} evidence {'line' if len(evidence) == 1 else 'lines'}: select "
                "one (or a cited section) to see it highlighted on its page.")

    def question_problem(question) -> str | None:
        """What is wrong with a question the engine would refuse (the same limits), or None."""
        q = (question or "").strip()
        if not q:
            return "Type a question first."
        if len(q) > settings.max_question_chars:
            return (f"The question is {len(q)} characters long; the limit is "
                    f"{settings.max_question_chars}.")
        return None

    def validate_question(question, *others):
        """Gradio validator of the ask events: one line under the question box, no other output
        touched (the last answer, tree and evidence stay)."""
        problem = question_problem(question)
        return [gr.validate(problem is None, problem or ""),
                *[gr.validate(True, "") for _ in others]]

    def validate_ask(doc, question, *others):
        return [gr.validate(True, ""), *validate_question(question, *others)]

    def clear_view():
        return "", "", [], [], "", gr.update(visible=False)

    def clear_page():
        return ("Select a cited node or an evidence line to see its page here.",
                gr.update(value=None, visible=False), gr.update(value="", visible=False))

    def section_title(doc_id, node_id, title: str | None) -> str:
        """A node's title, or (paragraphs and chunks have none) its label (``Tree.labels``)."""
        if title:
            return title
        try:
            return tree_of(int(doc_id)).label(int(node_id))
        except (DocumentNotFound, KeyError, TypeError, ValueError):
            return "(untitled)"

    def evidence_rows(evidence: list[dict]) -> list[list]:
        return [[i + 1, round(float(e["score"]), 3), e["page"] if e["page"] else "",
                 section_title(e["doc_id"], e["node_id"], e["title"]), e["text"], e["doc_id"],
                 e["node_id"]]
                for i, e in enumerate(evidence)]

    def show_view(view):
        """The notice line, the disagreement view, the evidence lines and the text-mode offer of
        the last answer (a State, so that the /ask API keeps its outputs)."""
        view = view or {}
        notice = view.get("notice")
        return (gr.skip() if notice is None else (f"**Note:** {md_text(notice)}" if notice else ""),
                gr.skip() if "agreement" not in view else view["agreement"],
                gr.skip() if "agreement_rows" not in view else view["agreement_rows"],
                gr.skip() if "evidence" not in view else evidence_rows(view["evidence"]),
                gr.skip() if "evidence_note" not in view else view["evidence_note"],
                gr.skip() if "offer_text" not in view else gr.update(visible=view["offer_text"]))

    def history_select(doc, evt: gr.SelectData):
        row = evt.row_value or []
        if not row or doc in (None, "", ALL):
            raise gr.Error("Select a question of the history.")
        rec = rt.library.get_query(int(row[0]))
        if rec is None or rec.doc_id != _doc_arg(doc):
            raise gr.Error("That question is no longer in the log.")
        rows = [("from the log", f"query {rec.id}"), ("mode", rec.mode),
                *metric_rows(rec.metrics or {})]
        metrics = "| metric | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)
        logged = rec.settings or {}
        mode_value = rec.mode if rec.mode in MODE_HELP else gr.skip()
        router_value = logged.get("router") if logged.get("router") in ROUTER_LABELS else gr.skip()
        if not rec.route:
            msg = "This question was answered without routing."
            view = {"notice": "", "agreement": msg, "agreement_rows": [], "evidence": [],
                    "evidence_note": "", "offer_text": False}
            return (rec.answer, metrics, [], empty_figure(msg), empty_figure(msg), [], {},
                    rec.question, view, mode_value, router_value)
        route = route_from_log(rec.route, rec.settings)
        fig = route_figure(route, None, title=f"Routing tree of query {rec.id} (from the log)")
        sel = [route.nodes[i] for i in route.selected]
        cited = [[j + 1, n.title, pages_label(n.page_start, n.page_end), n.doc_id, n.node_id]
                 for j, n in enumerate(sel)]
        view = {"notice": "", "agreement": "The other router's selection is not kept in the "
                "query log: ask again to compare the routers.", "agreement_rows": [],
                "evidence": [], "evidence_note": "Evidence lines are not kept in the query log: "
                "select a cited section to read its page.", "offer_text": False}
        return (rec.answer, metrics, cited, fig, manual_figure(route), route_rows(route),
                figure_summary(fig), rec.question, view, mode_value, router_value)

    def row_node(evt: gr.SelectData, doc_col: int, node_col: int):
        row = evt.row_value or []
        if len(row) <= max(doc_col, node_col) or row[doc_col] in (None, ""):
            return "The root of a library-wide route is not a stored node.", ""
        return node_view(row[doc_col], row[node_col])

    def page_outputs(doc_id, node_id, lines: list[Line]):
        """The page view (caption, page image, section text) of a stored node with ``lines``
        highlighted."""
        hidden = gr.update(value=None, visible=False)
        try:
            doc_id, node_id = int(doc_id), int(node_id)
            node = tree_of(doc_id).node(node_id)
            source = source_of(doc_id)
        except (DocumentNotFound, KeyError, TypeError, ValueError):
            return "That section is not in the library any more.", hidden, hidden
        try:
            pv = page_view(source, node, lines, title=section_title(doc_id, node_id, node.title))
        except Exception as e:  # a damaged file must not take the answer view down
            log.exception("page view of document %s node %s failed", doc_id, node_id)
            return (f"The page could not be rendered ({md_text(type(e).__name__)}).", hidden,
                    hidden)
        if pv.png is not None:
            from PIL import Image  # noqa: PLC0415

            image = Image.open(io.BytesIO(pv.png))
            return pv.caption, gr.update(value=image, visible=True), hidden
        return pv.caption, hidden, gr.update(value=pv.markdown, visible=True)

    def node_lines(view, doc_id, node_id) -> list[Line]:
        """The last answer's evidence lines in node (doc_id, node_id)."""
        return [Line(e["text"], e["page"], e["score"]) for e in (view or {}).get("evidence", [])
                if str(e["doc_id"]) == str(doc_id) and str(e["node_id"]) == str(node_id)]

    def cited_select(view, evt: gr.SelectData):
        row = evt.row_value or []
        head, text = row_node(evt, 3, 4)
        if len(row) < 5 or row[3] in (None, ""):
            return head, text, gr.skip(), gr.skip(), gr.skip()
        return (head, text, *page_outputs(row[3], row[4], node_lines(view, row[3], row[4])))

    def evidence_select(evt: gr.SelectData):
        row = evt.row_value or []
        doc_col, node_col = EVIDENCE_COLUMNS.index("doc"), EVIDENCE_COLUMNS.index("node")
        if len(row) <= node_col or row[doc_col] in (None, ""):
            return "Select an evidence line.", gr.skip(), gr.skip()
        page = row[EVIDENCE_COLUMNS.index("page")]
        line = Line(str(row[EVIDENCE_COLUMNS.index("sentence")]),
                    int(page) if page not in (None, "") else None)
        return page_outputs(row[doc_col], row[node_col], [line])

    def route_select(evt: gr.SelectData):
        return row_node(evt, ROUTE_COLUMNS.index("doc"), ROUTE_COLUMNS.index("node"))

    def agreement_select(evt: gr.SelectData):
        return row_node(evt, AGREEMENT_COLUMNS.index("doc"), AGREEMENT_COLUMNS.index("node"))

    # -- compare ---------------------------------------------------------------------------
    def do_compare(doc, question, mode_a, mode_b, k, max_depth, budget, gate, max_new_tokens):
        out = []
        table = []
        for mode in (mode_a, mode_b):
            try:
                a = run_ask(doc, question, options(mode, k, max_depth, budget, gate, False,
                                                   max_new_tokens))
            except MemoriesPending as e:  # this side waits for memories; the other still runs
                gr.Warning(str(e))
                out += [f"({e})", "", empty_figure(f"{mode} mode waits for the memories")]
                table.append([mode, None, None, None, None, None, 0, 0])
                continue
            fig, _, _, summary, _ = figures(a, doc)
            out += [a.text or "(nothing generated)", metrics_md(a), fig]
            m = a.metrics
            table.append([mode, round(m.ttft_ms), round(m.total_ms), m.prefill_tokens,
                          m.generated_tokens, round(m.peak_mem_mb, 1),
                          len(a.route.selected) if a.route else 0, len(a.cited)])
        return (*out, table)

    # -- layout ----------------------------------------------------------------------------
    with gr.Blocks(title="Manual explorer", analytics_enabled=False) as demo:
        gr.Markdown(
            "# Manual explorer\n"
            "Upload technical manuals; each becomes a section tree with one memory vector per "
            "node (H2MT). Ask a question and see which branches the router followed, which it "
            "pruned, and which nodes the answer came from.")
        with gr.Tabs():
            # The manual pickers accept any value (allow_custom_value): an API client names any
            # stored manual's id (or "all") whatever its session has seen; the handlers check
            # it against the library and reject an unknown id with one line.
            with gr.Tab("Library", id="library"):
                files = gr.File(file_count="multiple", file_types=list(ALLOWED_EXTS),
                                label=f"Upload manuals (PDF, Markdown, HTML, text; several at "
                                      f"once; up to {max_file_mb:g} MB and {max_pages} pages each)",
                                elem_id="upload-files")
                status = gr.Textbox(label="Indexing", lines=3, interactive=False,
                                    elem_id="index-status")
                mem_line = gr.Markdown(elem_id="memory-status")
                lib_table = gr.Dataframe(headers=LIBRARY_COLUMNS, value=library_rows(),
                                         label="Library (memories: ready, or n/N written so far)",
                                         interactive=False, type="array",
                                         elem_id="library-table")
                with gr.Row():
                    lib_doc = gr.Dropdown(label="Manual", choices=doc_choices(False),
                                          value=None, scale=4, elem_id="library-doc",
                                          allow_custom_value=True)
                    delete_btn = gr.Button("Delete this manual", variant="stop", scale=1,
                                           elem_id="delete-button", interactive=False)
                with gr.Row():
                    with gr.Column(scale=3):
                        outline_table = gr.Dataframe(headers=OUTLINE_COLUMNS, label="Outline "
                                                     "(select a row to read the node)",
                                                     interactive=False, type="array",
                                                     max_height=520, elem_id="outline-table",
                                                     column_widths=["9%", "60%", "15%", "8%",
                                                                    "8%"])
                    with gr.Column(scale=2):
                        lib_node_head = gr.Markdown(elem_id="library-node-head")
                        lib_node_text = gr.Textbox(label="Node text", lines=18,
                                                   interactive=False, elem_id="library-node-text")

            with gr.Tab("Ask", id="ask"):
                with gr.Row():
                    ask_doc = gr.Dropdown(label="Manual", choices=doc_choices(True), scale=2,
                                          elem_id="ask-doc", allow_custom_value=True)
                    question = gr.Textbox(label="Question", scale=5, lines=1,
                                          max_length=settings.max_question_chars,
                                          placeholder="e.g. How do I declare an array parameter?",
                                          elem_id="ask-question")
                    ask_btn = gr.Button("Ask", variant="primary", scale=1, elem_id="ask-button")
                ask_mem_line = gr.Markdown(elem_id="ask-memory-status")
                with gr.Accordion("Settings", open=True):
                    with gr.Row():
                        mode = gr.Radio(list(MODE_HELP), value="text", label="Answer from",
                                        info="; ".join(f"{m}: {h}" for m, h in MODE_HELP.items()),
                                        elem_id="ask-mode")
                    with gr.Row():
                        router = gr.Radio(ROUTER_CHOICES, value=settings.router,
                                          label="Find sections by",
                                          info="How sections are scored: all evidence combined, "
                                               "or one kind alone (words matched, meaning, "
                                               "memory).", elem_id="ask-router")
                        max_new = gr.Number(value=128, precision=0, minimum=1, maximum=512,
                                            label="Longest answer (tokens)",
                                            info="The answer stops here and says it was cut.",
                                            elem_id="ask-max-new")
                    with gr.Accordion("Advanced: routing and memories", open=False,
                                      elem_id="ask-advanced"):
                        with gr.Row():
                            k = gr.Slider(1, 8, value=3, step=1, label="Sections followed per level",
                                          info="At each level the router follows this many of a "
                                               "section's subsections (k); the rest are pruned.",
                                          elem_id="ask-k")
                            max_depth = gr.Number(value=0, precision=0, minimum=0,
                                                  label="Deepest level (0 = no limit)",
                                                  info="Routing stops at this depth of the tree.",
                                                  elem_id="ask-depth")
                            budget = gr.Number(value=0, precision=0, minimum=0,
                                               label="Most sections selected (0 = no limit)",
                                               info="Routing stops once this many are selected.",
                                               elem_id="ask-budget")
                        with gr.Row():
                            gate = gr.Checkbox(value=True, label="Re-read memories (memory mode)",
                                               info="The model may pass over each memory slot "
                                                    "a few extra times (the ArcAligner gate); "
                                                    "the tree shows how many.",
                                               elem_id="ask-gate")
                            hier_pos = gr.Checkbox(value=False,
                                                   label="Tell the model where each section sits "
                                                         "(memory mode)",
                                                   info="Adds each section's place in the tree "
                                                        "to its memory (HDT position codes).",
                                                   elem_id="ask-hier-pos")
                            gr.Dropdown(list(POLICIES), value=rt.parts.aggregation,
                                        label="How a section's memory sums up its subsections",
                                        interactive=False,
                                        info="Fixed when the memories are written (set "
                                             "H2MT_AGGREGATION, restart, upload again).")
                notice = gr.Markdown(elem_id="ask-notice")
                text_btn = gr.Button("Answer in text mode instead (from the sections' text)",
                                     visible=False, size="sm", elem_id="text-instead-button")
                view = gr.State({})
                with gr.Row():
                    with gr.Column(scale=3):
                        quote_md = gr.Markdown(visible=False, elem_id="quote-view")
                        answer = gr.Textbox(label="Answer (written by the model)", lines=4,
                                            interactive=False, elem_id="answer-text")
                        metrics = gr.Markdown(elem_id="answer-metrics")
                        cited = gr.Dataframe(headers=CITED_COLUMNS, type="array",
                                             interactive=False, elem_id="cited-table",
                                             label="Cited nodes (select a row to read it and "
                                                   "see its page)")
                        evidence_note = gr.Markdown(elem_id="evidence-note")
                        evidence_table = gr.Dataframe(
                            headers=EVIDENCE_COLUMNS, type="array", interactive=False,
                            elem_id="evidence-table", wrap=True, max_height=320,
                            column_widths=["5%", "8%", "7%", "20%", "50%", "5%", "5%"],
                            label="Evidence: sentences of the cited sections that support the "
                                  "answer (select one to see it on its page)")
                    with gr.Column(scale=2):
                        page_head = gr.Markdown("Select a cited node or an evidence line to "
                                                "see its page here.", elem_id="page-view-head")
                        page_image = gr.Image(type="pil", format="png", interactive=False,
                                              label="Page", visible=False, height=760,
                                              elem_id="page-view-image")
                        page_text = gr.Markdown(visible=False, max_height=760,
                                                elem_id="page-view-text")
                gr.Markdown(
                    "**Routing tree.** Colour = the score the router ranked by (colour bar: the "
                    "fused score, or one kind of evidence alone). Bold solid edges: the selected "
                    "path. Grey dashed: pruned branches. ▽ +N: N nodes below that the router "
                    "never scored. ⟳n on a selected node: extra gate loops (per layer in the "
                    "hover). Hover a node for its title, pages and each kind of evidence "
                    f"({', '.join(CHANNEL_COLUMNS)}): its own score and the best in its branch; "
                    "to read a node, select its row in a table below the tree.")
                route_plot = gr.Plot(label="Routing tree", elem_id="route-plot")
                with gr.Accordion("Fused router vs memory router: where they disagree",
                                  open=True):
                    agree_md = gr.Markdown(elem_id="router-agreement")
                    agree_table = gr.Dataframe(headers=AGREEMENT_COLUMNS, type="array",
                                               interactive=False, max_height=260,
                                               label="Sections selected by only one of the two "
                                                     "routers (select a row to read it)",
                                               elem_id="agreement-table")
                # full width: thirteen columns (three of them evidence channels)
                route_table = gr.Dataframe(headers=ROUTE_COLUMNS, type="array",
                                           interactive=False, max_height=420,
                                           label="Scored nodes (select a row to read it; "
                                                 "evidence columns: best score in the node's "
                                                 "branch)",
                                           column_widths=ROUTE_WIDTHS, elem_id="route-table")
                ask_node_head = gr.Markdown(elem_id="ask-node-head")
                ask_node_text = gr.Textbox(label="Node text", lines=8, max_lines=20,
                                           interactive=False, elem_id="ask-node-text")
                with gr.Accordion("The whole manual (icicle coloured by score)", open=False):
                    manual_plot = gr.Plot(label="Manual", elem_id="manual-plot")
                with gr.Accordion("Figure data (JSON)", open=False):
                    summary = gr.JSON(label="Routing tree summary", elem_id="route-summary")
                history = gr.Dataframe(headers=HISTORY_COLUMNS, type="array", interactive=False,
                                       max_height=300, elem_id="history-table",
                                       label=f"Questions asked about this manual, newest "
                                             f"{HISTORY_ROWS} (select one to see its answer "
                                             "and tree again)")

            with gr.Tab("Compare", id="compare"):
                gr.Markdown("Run the same question in two modes and compare answers, time to "
                            "first token, prefill tokens, peak memory and routing trees.")
                with gr.Row():
                    cmp_doc = gr.Dropdown(label="Manual", choices=doc_choices(True), scale=2,
                                          elem_id="compare-doc", allow_custom_value=True)
                    cmp_q = gr.Textbox(label="Question", scale=5, elem_id="compare-question")
                    cmp_btn = gr.Button("Compare", variant="primary", scale=1,
                                        elem_id="compare-button")
                with gr.Row():
                    mode_a = gr.Dropdown(list(MODES), value="memory", label="Mode A",
                                         elem_id="compare-mode-a")
                    mode_b = gr.Dropdown(list(MODES), value="text", label="Mode B",
                                         elem_id="compare-mode-b")
                    cmp_k = gr.Slider(1, 8, value=3, step=1, label="k")
                    cmp_depth = gr.Number(value=0, precision=0, minimum=0, label="Depth cap (0 = none)")
                    cmp_budget = gr.Number(value=0, precision=0, minimum=0, label="Budget (0 = none)")
                    cmp_gate = gr.Checkbox(value=True, label="Gate on")
                    cmp_new = gr.Number(value=64, precision=0, minimum=1, maximum=512,
                                        label="Max new tokens", elem_id="compare-max-new")
                cmp_table = gr.Dataframe(headers=["mode", "TTFT ms", "total ms", "prefill tokens",
                                                  "generated", "peak MB", "selected", "cited"],
                                         type="array", interactive=False, label="Side by side",
                                         elem_id="compare-table")
                with gr.Row():
                    with gr.Column():
                        ans_a = gr.Textbox(label="Answer A", lines=4, interactive=False,
                                           elem_id="compare-answer-a")
                        met_a = gr.Markdown()
                        plot_a = gr.Plot(label="Tree A", elem_id="compare-plot-a")
                    with gr.Column():
                        ans_b = gr.Textbox(label="Answer B", lines=4, interactive=False,
                                           elem_id="compare-answer-b")
                        met_b = gr.Markdown()
                        plot_b = gr.Plot(label="Tree B", elem_id="compare-plot-b")

        # -- events ----------------------------------------------------------------------------
        timer = gr.Timer(MEMORY_POLL_S)
        poll_key = gr.State("")
        pickers_out = [lib_doc, ask_doc, cmp_doc]
        # one progress bar, on the indexing status (not one per output component)
        files.upload(upload, files, [status, lib_table, *pickers_out], api_name="ingest",
                     concurrency_limit=1, concurrency_id="indexing",
                     show_progress_on=[status]).then(
            poll, [poll_key, ask_doc], [lib_table, mem_line, ask_mem_line, poll_key],
            api_visibility="private", show_progress="hidden")
        lib_doc.change(outline, lib_doc, [outline_table, lib_node_head, lib_node_text],
                       api_name="outline")
        outline_table.select(outline_select, lib_doc, [lib_node_head, lib_node_text],
                             api_visibility="private")
        lib_table.select(library_select, None, lib_doc, api_visibility="private")
        # Delete is live only while a manual is chosen (an empty library has nothing to delete).
        lib_doc.change(lambda d: gr.update(interactive=d not in (None, "")), lib_doc, delete_btn,
                       queue=False, api_visibility="private", show_progress="hidden")
        delete_btn.click(delete, lib_doc, [status, lib_table, *pickers_out, outline_table,
                                           lib_node_head, lib_node_text],
                         api_name="delete_manual")
        demo.load(refresh, None, [lib_table, *pickers_out], api_name="library")
        demo.load(poll, [poll_key, ask_doc], [lib_table, mem_line, ask_mem_line, poll_key],
                  api_visibility="private", show_progress="hidden")
        timer.tick(poll, [poll_key, ask_doc], [lib_table, mem_line, ask_mem_line, poll_key],
                   api_visibility="private", show_progress="hidden", concurrency_id="poll",
                   concurrency_limit=4)

        ask_inputs = [ask_doc, question, mode, k, max_depth, budget, gate, hier_pos, max_new,
                      router]
        ask_outputs = [answer, metrics, cited, route_plot, manual_plot, route_table, summary,
                       history, quote_md, page_head, page_image, page_text, view]
        view_outputs = [notice, agree_md, agree_table, evidence_table, evidence_note, text_btn]
        page_outputs_ = [page_head, page_image, page_text]
        for trigger in (ask_btn.click, question.submit):  # no stale comparison while asking
            # (a refused question keeps the view: the validator's line is all that changes)
            trigger(lambda q: clear_view() if question_problem(q) is None
                    else tuple(gr.skip() for _ in view_outputs), question, view_outputs,
                    queue=False, api_visibility="private", show_progress="hidden")
            trigger(lambda q: clear_page() if question_problem(q) is None
                    else tuple(gr.skip() for _ in page_outputs_), question, page_outputs_,
                    queue=False, api_visibility="private", show_progress="hidden")
        ask_btn.click(do_ask, ask_inputs, ask_outputs, concurrency_limit=ANSWER_CONCURRENCY,
                      concurrency_id="answer", api_name="ask", validator=validate_ask).then(
            show_view, view, view_outputs, api_visibility="private", show_progress="hidden")
        question.submit(do_ask, ask_inputs, ask_outputs, concurrency_limit=ANSWER_CONCURRENCY,
                        concurrency_id="answer", api_visibility="private",
                        validator=validate_ask).then(
            show_view, view, view_outputs, api_visibility="private", show_progress="hidden")
        # a degenerate memory answer: one click asks the same question in text mode
        text_btn.click(lambda: "text", None, mode, queue=False, api_visibility="private").then(
            clear_view, None, view_outputs, queue=False, api_visibility="private",
            show_progress="hidden").then(
            do_ask, ask_inputs, ask_outputs, concurrency_limit=ANSWER_CONCURRENCY,
            concurrency_id="answer", api_visibility="private").then(
            show_view, view, view_outputs, api_visibility="private", show_progress="hidden")
        ask_doc.change(history_rows, ask_doc, history, api_visibility="private")
        ask_doc.change(doc_memory_line, ask_doc, ask_mem_line, api_visibility="private",
                       show_progress="hidden")
        history.select(history_select, ask_doc, [answer, metrics, cited, route_plot, manual_plot,
                                                 route_table, summary, question, view, mode,
                                                 router],
                       api_visibility="private").then(
            show_view, view, view_outputs, api_visibility="private", show_progress="hidden")
        cited.select(cited_select, view, [ask_node_head, ask_node_text, *page_outputs_],
                     api_visibility="private", concurrency_limit=2, concurrency_id="pages")
        evidence_table.select(evidence_select, None, page_outputs_, api_visibility="private",
                              concurrency_limit=2, concurrency_id="pages")
        route_table.select(route_select, None, [ask_node_head, ask_node_text],
                           api_visibility="private")
        agree_table.select(agreement_select, None, [ask_node_head, ask_node_text],
                           api_visibility="private")
        gr.api(node_api, api_name="node")

        cmp_btn.click(do_compare, [cmp_doc, cmp_q, mode_a, mode_b, cmp_k, cmp_depth, cmp_budget,
                                   cmp_gate, cmp_new],
                      [ans_a, met_a, plot_a, ans_b, met_b, plot_b, cmp_table],
                      concurrency_limit=ANSWER_CONCURRENCY, concurrency_id="answer",
                      api_name="compare")
    writer.resume_incomplete()  # memories interrupted by a crash or a restart
    return demo


