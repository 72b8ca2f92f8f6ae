"""The engine's errors about a request as the page shows them: one line, never a traceback.

``user_errors(what)`` is the one wrapper of every handler (``app.shared.binding.bind`` puts each
tab's and each API's handler inside it; the asks are answered inside it too): a request's
problem is its one line; a storage fault (a full disk, a read-only or unreachable database, a
lock held past the timeout: storage/faults.py) is one line naming it, with a reference to one
line in the server's log; anything else (a bug) is one line with a reference to its traceback.
"""
from __future__ import annotations

import contextlib
import logging
import secrets

import gradio as gr

from engine.ask import AskError
from engine.ask import MemoriesPending as MemoriesNotWritten
from storage.connection import first_line
from storage.errors import MissingMemories, StaleMemories, StorageError
from storage.faults import classify

# What each handler does, as the first words of its line when it fails ("Listing the library
# failed: the database cannot be reached. ..."); by the handler's function name.
ACTIONS = {
    "do_ask": "Answering", "ask_manual": "Answering", "do_compare": "Comparing the modes",
    "upload": "Uploading", "refresh": "Listing the library", "poll": "Listing the library",
    "list_manuals": "Listing the library", "outline": "Showing the outline",
    "manual_outline": "Showing the outline", "outline_select": "Showing the node",
    "node_api": "Showing the node", "read_node": "Showing the node",
    "cited_select": "Showing the node", "route_select": "Showing the node",
    "agreement_select": "Showing the node", "evidence_select": "Showing the page",
    "passage_select": "Showing the page", "delete": "Deleting the manual",
    "wrong_rows": "Listing the answers marked wrong", "rate_shown": "Keeping your verdict",
    "rate_answer": "Keeping your verdict", "run_file": "The evaluation",
    "row_tree": "Showing the evaluated question", "use_example": "Loading the example",
    "manual_choices": "Listing the library", "pick_example": "Loading the example",
}

log = logging.getLogger(__name__)


class MemoriesPending(Exception):
    """The request needs memories that are still being written (the engine's one-line message)."""


def user_error(message: str) -> gr.Error:
    """A request's problem as one line for the page; not a traceback in the server's log."""
    return gr.Error(message, print_exception=False)


@contextlib.contextmanager
def user_errors(what: str = "Answering"):
    """The errors of a request as the page shows them (``what``: the action, "Answering"):
    MemoriesPending (a notice, not an error) when it needs memories still being written, else
    one gr.Error line. A gr.Error raised inside passes as it is."""
    try:
        yield
    except (gr.Error, MemoriesPending):
        raise
    except AskError as e:
        if isinstance(e, MemoriesNotWritten):
            raise MemoriesPending(str(e)) from None
        raise user_error(str(e)) from None
    except (StaleMemories, MissingMemories):
        raise user_error("This manual's memories were written by another model or "
                         "aggregation policy: upload the file again to rewrite them.") from None
    except Exception as e:  # noqa: BLE001 - the app stays up; one line says why
        if (fault := classify(e)) is not None:  # the storage's fault, named
            raise user_error(storage_fault(what, fault, e)) from None
        if isinstance(e, StorageError):  # e.g. the manual deleted meanwhile (another replica)
            raise user_error(str(e)) from None
        # a bug or a failing model: this request fails, the app stays up
        raise user_error(internal_error(what)) from None


def storage_fault(what: str, fault, e: BaseException) -> str:
    """One line for the page about a storage fault (``fault``: storage/faults.py), and one in
    the server's log under the same reference (no traceback: the cause is known)."""
    ref = secrets.token_hex(4)
    log.warning("%s failed [ref %s]: %s (%s: %s)", what.lower(), ref, fault.cause,
                type(e).__name__, first_line(e))
    return f"{fault.line(what)} (ref {ref} in the server's log)"


def internal_error(what: str) -> str:
    """One line for the page about an unexpected failure (a bug, a failing model, a database
    that broke off): a reference to the traceback in the server's log, never the exception's
    text (it may hold SQL, paths or a URL)."""
    ref = secrets.token_hex(4)
    log.exception("%s failed [ref %s]", what.lower(), ref)
    return (f"{what} failed (internal error, ref {ref} in the server's log). The app is still "
            "running: try again, or report the ref to whoever runs it.")
