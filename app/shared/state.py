"""The app's state object (``AppState``) and the helpers every tab shares over it.

``AppState`` holds what one built app works over: the runtime, the effective settings, the
background memory writer and the caches of trees, source files and finished memories. The tab
modules define their handlers at module level as ``handler(s: AppState, *inputs)`` (the Ask,
Compare and Evaluation tabs' as ``handler(s, tab, *inputs)`` or ``handler(s, tab, request)``,
returning updates keyed by the tab's components; the Library tab's still return tuples);
``app.shared.binding.bind`` turns one into the Gradio handler of its inputs. The engine's
errors as the page shows them are in ``app.shared.user_errors``, the lines about memories not
written yet in ``app.shared.memory_lines``.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

import gradio as gr
import plotly.graph_objects as go

from app.shared.accounts import Accounts
from app.shared.binding import gpu
from app.shared.memory_writer import MemoryWriter
from app.shared.user_errors import user_error, user_errors
from engine.answer.options import parse_doc_id
from engine.answer.request import LogAs
from engine.answer.response import Answer
from engine.ask import AskError, AskOptions, ask, ask_stream
from engine.runtime import Runtime
from engine.settings import Settings
from storage.errors import DocumentNotFound

SOURCE_CACHE = 4  # source files (PDF bytes) kept in memory for the page view
TREE_CACHE = 16  # documents' node views kept in memory (least recently used out)
ALL = "all"
READY = "ready"


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
    """The manual a picker, a table row or a client names: its id, or ``ALL``; one line
    (gr.Error) for nothing chosen or a value that is no id. The app's one reading of a
    document id (``picked_id`` is the same, lenient)."""
    if doc in (None, "", ALL):
        if doc in (None, ""):
            raise gr.Error("Choose a manual first (upload one in the Library tab).")
        return ALL
    try:
        return parse_doc_id(doc)
    except AskError as e:
        raise gr.Error(str(e)) from None


def picked_id(doc) -> int | None:
    """``doc_arg``'s id, or None where a view shows nothing instead of a line: nothing chosen,
    every manual, or a typed value that names none."""
    try:
        target = doc_arg(doc)
    except gr.Error:
        return None
    return None if target == ALL else target


# -- asking --------------------------------------------------------------------------------------

# The runtimes of the app's states by id: an ask on a ZeroGPU worker (``gpu``) receives only
# plain arguments (the runtime's id, the request's values), never the runtime itself.
RUNTIMES: dict[int, Runtime] = {}


@gpu
def _ask(rt_id: int, doc, question, opts: AskOptions, asker: str | None) -> Answer:
    target = doc_arg(doc)
    with user_errors():
        return ask(RUNTIMES[rt_id], target, question, opts, LogAs(asker))


@gpu
def _ask_stream(rt_id: int, doc, question, opts: AskOptions, asker: str | None):
    target = doc_arg(doc)
    with user_errors():
        yield from ask_stream(RUNTIMES[rt_id], target, question, opts, LogAs(asker))


# -- the state -----------------------------------------------------------------------------------

@dataclass(eq=False)
class AppState:
    """What one app works over. ``trees`` and ``sources`` cache node views and source files
    per document; ``complete`` remembers (doc id, sha256) whose memories are all written, so the
    library stops counting them. ``ask``/``ask_stream`` answer a request."""
    rt: Runtime
    settings: Settings
    writer: MemoryWriter
    trees: dict[int, object] = field(default_factory=dict)  # doc_id -> Tree
    sources: dict[int, tuple[str, object]] = field(default_factory=dict)  # doc_id -> (sha, file)
    complete: set[tuple[int, str]] = field(default_factory=set)
    examples: object | None = None  # app/shared/examples.py's ExampleManual, None without examples
    accounts: Accounts = field(default_factory=Accounts)  # sign-in off unless given

    def __post_init__(self) -> None:
        RUNTIMES[id(self.rt)] = self.rt  # what the asks on a GPU worker find it by

    def ask(self, doc, question, opts: AskOptions, asker: str | None = None) -> Answer:
        """The engine's Answer (errors as ``user_errors`` says), logged as ``asker``'s."""
        return _ask(id(self.rt), doc, question, opts, asker)

    def ask_stream(self, doc, question, opts: AskOptions, asker: str | None = None):
        """``ask`` as the engine's events (RouteReady, TokenChunk..., AnswerReady), with the
        same errors; they can only come before the first event."""
        return _ask_stream(id(self.rt), doc, question, opts, asker)

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
        if state == "paused":  # a storage fault: "memories paused: the disk is full (60/62)"
            cause = self.writer.causes.get(d.id, "a storage fault")
            return f"memories paused: {cause} ({done}/{total} written)"
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
        if state not in WAIT_REASONS and self.examples is not None \
                and self.examples.indexing(d.sha256):
            state = "indexing"  # queued once its indexing ends: not "not queued"
        done = max(p.done, live[0]) if live and live[1] == p.total else p.done
        return done, p.total, state


# Why a document's memories wait, after its "memories n/N" (the writer's state); a state not
# here is a document nobody will write (indexed text-only): NOT_QUEUED.
WAIT_REASONS = {
    "writing": "",
    "indexing": " (written once indexing ends)",
    "queued": " (queued)",
    "retrying": " (a write failed; retrying shortly)",
    "unclaimed": " (queued, but no memory worker takes it: start one with this model's "
                 "settings, or set H2MT_APP_WORKER=1)",
    "failed": " (failed: upload the file again)",
    "paused": " (paused)",  # ``AppState.memory_label`` says why
}
NOT_QUEUED = " (not queued)"
# -- documents and nodes -------------------------------------------------------------------------

def doc_choices(s: AppState, with_all: bool) -> list[tuple[str, str]]:
    docs = s.rt.library.list_documents()
    out = [(f"#{d.id} {d.title} ({d.n_nodes} nodes)", str(d.id)) for d in docs]
    if with_all and len(docs) > 1:
        out.append(("All manuals (library-wide routing)", ALL))
    return out


def pickers(s: AppState, value: str | None):
    """Updates for the three manual pickers (library, ask, compare)."""
    lib, asks = doc_choices(s, False), doc_choices(s, True)
    ids = {v for _, v in asks}
    v = value if value in ids else (lib[-1][1] if lib else None)
    return (gr.update(choices=lib, value=v), gr.update(choices=asks, value=v),
            gr.update(choices=asks, value=v))


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
    head = (f"**{title}** — {tree.pages_name(n.page_start, n.page_end)}, depth {n.depth}, "
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
