"""The engine's errors about a request as the page shows them: one line, never a traceback."""
from __future__ import annotations

import contextlib
import logging
import secrets

import gradio as gr

from engine.ask import AskError
from engine.ask import MemoriesPending as MemoriesNotWritten
from storage.errors import MissingMemories, StaleMemories, StorageError

log = logging.getLogger(__name__)


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
