"""The app's state object and the helpers every tab shares.

``AppState`` holds what one built app works over: the runtime, the effective settings, the
background memory writer and the caches of trees, source files and finished memories. The tab
modules (library_tab, ask_tab, compare_tab) define their handlers at module level as
``handler(s: AppState, *inputs)`` (the Ask tab's as ``handler(s, tab, request)``, returning
updates keyed by the tab's components); ``bind`` turns one into the Gradio handler of its inputs.
"""
from __future__ import annotations

import contextlib
import functools
import html
import inspect
import logging
import re
import secrets
from dataclasses import dataclass, field
from typing import Callable

import gradio as gr
import plotly.graph_objects as go

from app.accounts import Accounts
from app.hover import pages_label
from app.memory_writer import MemoryWriter
from engine.answer.options import parse_doc_id
from engine.ask import AskError, AskOptions, ask, ask_stream
from engine.ask import MemoriesPending as MemoriesNotWritten
from engine.runtime import Runtime
from engine.settings import Settings
from storage.errors import DocumentNotFound, MissingMemories, StaleMemories, StorageError

log = logging.getLogger(__name__)

SOURCE_CACHE = 4  # source files (PDF bytes) kept in memory for the page view
TREE_CACHE = 16  # documents' node views kept in memory (least recently used out)
ALL = "all"
READY = "ready"


def gpu(fn):
    """``spaces.GPU`` on a Hugging Face ZeroGPU Space; a no-op anywhere else."""
    try:
        import spaces  # noqa: PLC0415
    except ImportError:
        return fn
    return spaces.GPU(fn)


def bind(s: AppState, fn: Callable, *bound, request: type | None = None,
         on_gpu: bool = False) -> Callable:
    """``fn(s, *bound, *inputs)`` as a Gradio handler of ``*inputs`` (``bound``: the tab's
    components, for handlers that return updates keyed by component; ``on_gpu``: wrapped by
    ``gpu``). ``request``: a dataclass whose fields are the inputs (app/ask_request.py): the
    handler's parameters are its fields and ``fn`` receives one instance of it.

    Written by hand because ``functools.partial`` does not fit: Gradio reads a handler's type
    hints (``gr.SelectData``) and defaults (``gr.Progress``, a parameter a client may leave out)
    from the function itself, which a partial hides, and it streams only from a generator
    function. The handler keeps ``fn``'s name, signature (less ``s`` and ``bound``, or
    ``request``'s), annotations and generator-ness. ``s`` is closed over, never passed as an
    argument, so a ZeroGPU worker receives only the request's plain inputs.
    """
    skip = 1 + len(bound)
    wants_user = "user" in inspect.signature(fn).parameters  # keyword-only: the signed-in name
    if request is None:
        sig = inspect.signature(fn)
        sig = sig.replace(parameters=[p for p in list(sig.parameters.values())[skip:]
                                      if p.name != "user"])

        def inputs(*args, **kwargs):
            return args, kwargs
    else:
        sig = inspect.signature(request).replace(return_annotation=inspect.Signature.empty)

        def inputs(*args, **kwargs):
            return (request(*args, **kwargs),), {}
    if wants_user:  # Gradio fills a positional gr.Request parameter (after the inputs): its
        # username is the signed-in name
        params = list(sig.parameters.values())
        at = next((i for i, p in enumerate(params) if p.kind not in (
            p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)), len(params))
        sig = sig.replace(parameters=[*params[:at], inspect.Parameter(
            "gr_request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
            annotation=gr.Request), *params[at:]])
        plain_inputs = inputs

        def inputs(*args, **kwargs):
            req = kwargs.pop("gr_request", None)
            # at its place, or (a client that left an input with a default out) right after
            # the inputs it sent: Gradio inserts it at its index of a shorter list
            i = next((i for i in range(len(args) - 1, -1, -1)
                      if isinstance(args[i], gr.Request)), None)
            if i is not None:
                args, req = args[:i] + args[i + 1:], args[i]
            args, kwargs = plain_inputs(*args, **kwargs)
            return args, {**kwargs, "user": getattr(req, "username", None)}
    if inspect.isgeneratorfunction(fn):
        def handler(*args, **kwargs):
            args, kwargs = inputs(*args, **kwargs)
            yield from fn(s, *bound, *args, **kwargs)
    else:
        def handler(*args, **kwargs):
            args, kwargs = inputs(*args, **kwargs)
            return fn(s, *bound, *args, **kwargs)
    functools.update_wrapper(handler, fn)
    handler.__signature__ = sig
    handler.__annotations__ = {k: v for k, v in fn.__annotations__.items()
                               if k in sig.parameters or k == "return"}
    if wants_user:
        handler.__annotations__["gr_request"] = gr.Request
    return gpu(handler) if on_gpu else handler


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


def doc_arg(doc) -> int | str:
    if doc in (None, "", ALL):
        if doc in (None, ""):
            raise gr.Error("Choose a manual first (upload one in the Library tab).")
        return ALL
    try:
        return parse_doc_id(doc)
    except AskError as e:
        raise gr.Error(str(e)) from None


class MemoriesPending(Exception):
    """The request needs memories that are still being written (the engine's one-line message)."""


def user_error(message: str) -> gr.Error:
    """A request's problem as one line for the page; not a traceback in the server's log."""
    return gr.Error(message, print_exception=False)


@contextlib.contextmanager
def user_errors():
    """The engine's errors about a request as the page shows them: MemoriesPending (a
    notice, not an error) when it needs memories still being written, else gr.Error."""
    try:
        yield
    except AskError as e:
        if isinstance(e, MemoriesNotWritten):
            raise MemoriesPending(str(e)) from None
        raise user_error(str(e)) from None
    except (StaleMemories, MissingMemories):
        raise user_error("This manual's memories were written by another model or "
                         "aggregation policy: upload the file again to rewrite them.") from None
    except StorageError as e:  # e.g. the manual deleted meanwhile (through another replica)
        raise user_error(str(e)) from None
    except Exception:  # a bug or a failing model: this request fails, the app stays up
        raise user_error(internal_error("Answering")) from None


def internal_error(what: str) -> str:
    """One line for the page about an unexpected failure (a bug, a failing model, a database
    that broke off): a reference to the traceback in the server's log, never the exception's
    text (it may hold SQL, paths or a URL)."""
    ref = secrets.token_hex(4)
    log.exception("%s failed [ref %s]", what.lower(), ref)
    return (f"{what} failed (internal error, ref {ref} in the server's log). The app is still "
            "running: try again, or report the ref to whoever runs it.")


# -- the state -----------------------------------------------------------------------------------

@dataclass(eq=False)
class AppState:
    """What one app works over. ``trees`` and ``sources`` cache node views and source files
    per document; ``complete`` remembers (doc id, sha256) whose memories are all written, so the
    library stops counting them. ``run_ask``/``run_ask_stream`` answer a request (below)."""
    rt: Runtime
    settings: Settings
    writer: MemoryWriter
    trees: dict[int, object] = field(default_factory=dict)  # doc_id -> Tree
    sources: dict[int, tuple[str, object]] = field(default_factory=dict)  # doc_id -> (sha, file)
    complete: set[tuple[int, str]] = field(default_factory=set)
    examples: object | None = None  # app/examples.py's ExampleManual, None without examples
    accounts: Accounts = field(default_factory=Accounts)  # sign-in off unless given
    run_ask: Callable = field(init=False, repr=False)
    run_ask_stream: Callable = field(init=False, repr=False)

    def __post_init__(self) -> None:
        rt = self.rt

        def run_ask(doc, question, opts: AskOptions, asker: str | None = None):
            """The engine's Answer (errors as ``user_errors`` says), logged as ``asker``'s."""
            target = doc_arg(doc)
            with user_errors():
                return ask(rt, target, question, opts, asker=asker)

        def run_ask_stream(doc, question, opts: AskOptions, asker: str | None = None):
            """``run_ask`` as the engine's events (RouteReady, TokenChunk..., AnswerReady), with
            the same errors; they can only come before the first event."""
            target = doc_arg(doc)
            with user_errors():
                yield from ask_stream(rt, target, question, opts, asker=asker)

        # closures over the runtime, so that a ZeroGPU worker receives only plain arguments
        self.run_ask, self.run_ask_stream = gpu(run_ask), gpu(run_ask_stream)

    def require_admin(self, user: str | None, what: str) -> None:
        """Refuse (one line) ``what`` to a signed-in person who is not an admin."""
        if not self.accounts.is_admin(user):
            raise user_error(f"Only admins may {what} (H2MT_ADMINS); {user or 'you'} may ask "
                             "questions.")

    def history_asker(self, user: str | None) -> str | None:
        """Whose questions ``user`` sees in the history: their own, or (admins, no sign-in)
        everyone's (None)."""
        return None if self.accounts.sees_all(user) else (user or "")

    def tree_of(self, doc_id: int):
        """The document's stored tree, the ``TREE_CACHE`` most recently used kept in memory."""
        tree = self.trees.pop(doc_id, None)  # re-inserted: the dict's order is least recent first
        if tree is None:
            tree = self.rt.library.get_tree(doc_id)
        self.trees[doc_id] = tree
        while len(self.trees) > TREE_CACHE:
            try:  # another request's thread may change the dict meanwhile
                self.trees.pop(next(iter(self.trees)), None)
            except (StopIteration, RuntimeError):
                break
        return tree

    def source_of(self, doc_id: int):
        """The document's stored file (None when stored without it), a few kept in memory."""
        sha = self.rt.library.get_document(doc_id).sha256
        hit = self.sources.get(doc_id)
        if hit is None or hit[0] != sha:
            while len(self.sources) >= SOURCE_CACHE:
                self.sources.pop(next(iter(self.sources)))
            hit = self.sources[doc_id] = (sha, self.rt.library.get_source(doc_id))
        return hit[1]

    def forget(self, doc_id: int) -> None:
        """Drop every cached view of a deleted document (SQLite may reuse its id)."""
        self.trees.pop(doc_id, None)
        self.sources.pop(doc_id, None)
        for name in ("docs", "flat"):
            cache = self.rt.cache.get(name, {})
            for key in [k for k in cache if k[0] == doc_id]:
                cache.pop(key, None)

    def memory_label(self, d) -> str:
        """"ready", or "memories n/N" (and why it waits) of a listed document's memories under
        the runtime's fingerprint: one COUNT query until it is ready, none after."""
        try:
            counts = self.memory_counts(d)
        except DocumentNotFound:
            return "deleted"
        if counts is None:
            return READY
        done, total, state = counts
        return f"memories {done}/{total}{WAIT_REASONS.get(state, NOT_QUEUED)}"

    def memory_counts(self, d) -> tuple[int, int, str] | None:
        """(written, nodes, the writer's state) of a listed document's memories, the live count
        of a job being written included; None when they are complete. Every line about
        memories on the page reads this. DocumentNotFound for a document deleted meanwhile."""
        key = (d.id, d.sha256)
        if key in self.complete:
            return None
        p = self.rt.library.memory_progress(d.id, self.rt.fingerprint)
        if p.complete:
            self.complete.add(key)
            return None
        state, live = self.writer.state(d.id)
        done = max(p.done, live[0]) if live and live[1] == p.total else p.done
        return done, p.total, state


# Why a document's memories wait, after its "memories n/N" (the writer's state); a state not
# here is a document nobody will write (indexed text-only): NOT_QUEUED.
WAIT_REASONS = {
    "writing": "",
    "queued": " (queued)",
    "retrying": " (a write failed; retrying shortly)",
    "unclaimed": " (queued, but no memory worker takes it: start one with this model's "
                 "settings, or set H2MT_APP_WORKER=1)",
    "failed": " (failed: upload the file again)",
}
NOT_QUEUED = " (not queued)"
HOW_TO_WRITE = ("to write them, upload the file again or run `python -m engine worker` on this "
                "library")


# -- memories still being written ------------------------------------------------------------------

def pending_list(labels: dict[int, str]) -> str:
    """"#3: 40/120, #4: 0/80 (queued)" of the documents whose memories are not ready."""
    return ", ".join(f"#{i}: {lab.removeprefix('memories ')}"
                     for i, lab in labels.items() if lab != READY)


def picked_docs(s: AppState, doc) -> list:
    """The listed documents of a picked manual (or every manual: ``ALL``); none for a value
    that names no stored manual."""
    try:
        return (s.rt.library.list_documents() if doc == ALL
                else [s.rt.library.get_document(int(doc))])
    except (DocumentNotFound, TypeError, ValueError):
        return []


def doc_labels(s: AppState, doc) -> dict[int, str]:
    """The memory labels of a picked manual (or of every manual: ``ALL``)."""
    return {d.id: s.memory_label(d) for d in picked_docs(s, doc)}


def memories_line(labels: dict[int, str], waiting: str) -> str:
    """One or two sentences on the memories not ready among ``labels``: those being written,
    and those nobody writes (indexed text-only) with how to write them; ``waiting``: what
    works meanwhile and what waits (a sentence). Empty when every one is ready."""
    written = {i: lab for i, lab in labels.items() if lab != READY and NOT_QUEUED not in lab}
    idle = {i: lab.replace(NOT_QUEUED, "") for i, lab in labels.items() if NOT_QUEUED in lab}
    out = []
    if written:
        out.append(f"Memories are being written ({pending_list(written)}).")
    if idle:
        out.append(f"Memories are not written and not queued ({pending_list(idle)}): "
                   f"{HOW_TO_WRITE}.")
    return " ".join([*out, waiting]) if out else ""


def doc_memory_line(s: AppState, doc, labels: dict[int, str] | None = None) -> str:
    """The Ask tab's line about the chosen manual's memories (empty when they are ready)."""
    if doc in (None, ""):
        return ""
    if labels is None:
        labels = doc_labels(s, doc)
    elif doc != ALL:
        try:
            labels = {int(doc): labels.get(int(doc), READY)}
        except (TypeError, ValueError):
            return ""
    return memories_line(labels, "Text and route modes work now; memory mode and the memory "
                                 "router wait for them.")


def doc_counts(s: AppState, doc) -> tuple[int, int, bool]:
    """(written, nodes, being written?) of the memories not ready of a picked manual (or of
    every manual), as the library shows them; being written is False when none is queued."""
    done = total = 0
    queued = False
    for d in picked_docs(s, doc):
        try:
            counts = s.memory_counts(d)
        except DocumentNotFound:
            continue
        if counts is not None:
            done, total = done + counts[0], total + counts[1]
            queued = queued or counts[2] in WAIT_REASONS
    return done, total, queued


# The engine's words on memories still being written (engine.documents.pending_line), whose
# count the page replaces with the library's (``agreeing_notice``).
ENGINE_PENDING = re.compile(r"memories are being written \(\d+/\d+ nodes\)")


def agreeing_notice(s: AppState, doc, text: str) -> str:
    """An engine notice as the page shows it: its count of memories written replaced by the one
    the library shows (``doc_counts``), "not written" where nobody writes them, and its first
    letter a capital."""
    if ENGINE_PENDING.search(text):
        done, total, queued = doc_counts(s, doc)
        words = (f"memories are being written ({done}/{total} nodes)" if queued
                 else f"memories are not written ({done}/{total} nodes; {HOW_TO_WRITE})")
        text = ENGINE_PENDING.sub(words, text)
    return text[:1].upper() + text[1:]


def pending_unavailable(s: AppState, doc) -> str:
    """Why the memory router's selection is missing, for the disagreement view."""
    done, total, queued = doc_counts(s, doc)
    if done < total:
        return (f"memory router not available yet (memories being written {done}/{total})"
                if queued else f"memory router not available (memories not written: "
                               f"{HOW_TO_WRITE})")
    return "memory router not available for this route"


# -- documents and nodes -------------------------------------------------------------------------

def doc_choices(s: AppState, with_all: bool) -> list[tuple[str, str]]:
    docs = s.rt.library.list_documents()
    out = [(f"#{d.id} {d.title} ({d.n_nodes} nodes)", str(d.id)) for d in docs]
    if with_all and len(docs) > 1:
        out.append(("All manuals (library-wide routing)", ALL))
    return out


def node_view(s: AppState, doc_id, node_id):
    """Header (Markdown) and text of one stored node."""
    try:
        tree = s.tree_of(int(doc_id))
        n = tree.node(int(node_id))
    except (DocumentNotFound, KeyError, TypeError, ValueError):
        return "That node is not in the library any more.", ""
    labels = tree.labels()
    path = " › ".join(md_text(labels[p.id]) for p in tree.path(n.id)[1:-1])
    title = md_text(labels[n.id])
    head = (f"**{title}** — {pages_label(n.page_start, n.page_end, tree)}, depth {n.depth}, "
            f"{n.tokens} tokens, node {n.id} of manual #{int(doc_id)}"
            + (", read by OCR (a scanned page)" if tree.is_ocr(n) else ""))
    if path:
        head += f"  \nin: {path}"
    return head, n.text or "(this node has only its heading; its text is in its children)"


def section_title(s: AppState, doc_id, node_id, title: str | None) -> str:
    """A node's title, or (paragraphs and chunks have none) its label (``Tree.labels``)."""
    if title:
        return title
    try:
        return s.tree_of(int(doc_id)).label(int(node_id))
    except (DocumentNotFound, KeyError, TypeError, ValueError):
        return "(untitled)"
