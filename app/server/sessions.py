"""A bound on what the Gradio server keeps per browser session (the app's soak, issue 26).

Gradio keeps one ``SessionState`` per session: a copy of the page's components and their last
values (answers, figures, tables). Two things made a long-running server grow:

1. A session's stale component copies. When a handler returns ``gr.skip()`` (or any
   ``gr.update``) for an output, Gradio stores a new copy of that component, with a fresh id,
   under the output's id; when a later value goes to the same output, Gradio adds that copy under
   its *own* id as well (``Blocks.postprocess_data``), and the next skip replaces the copy under
   the output's id only. The copy under its own id, with the value it was given (a routing tree's
   figure JSON, the route table), is never looked up or removed again. The Ask tab streams an
   answer by sending its tokens with the other outputs skipped and then every output's final
   value, so each answer left a few such copies in its session (one Plot, Dataframes and their
   values per answer; the growth they caused is in docs/results.md, "Soak: 600 asks").
   ``drop_stale_copies`` removes the copies no output points to any more, every
   ``PRUNE_EVERY_S`` seconds for every session (``start_pruning``).
2. The number of sessions: Gradio drops a session's state only past ``state_session_capacity``
   sessions (10,000 by default), each holding its last answer's figures. ``SESSION_CAPACITY``
   keeps the most recently active few hundred (``launch(state_session_capacity=...)``, as
   Gradio's documentation advises to reduce memory); an older session that comes back starts
   from the page's defaults (its last answer's evidence lines are gone; asking again restores
   them).

Written by hand because Gradio has no setting for the first: the copies are its internal
bookkeeping of updated components.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)

SESSION_CAPACITY = 300  # sessions whose state the server keeps (Gradio's default: 10,000)
PRUNE_EVERY_S = 30.0


def drop_stale_copies(session, defined: set[int]) -> int:
    """Remove from one Gradio ``SessionState`` the component copies that no component of the
    page (``defined``: the app's component ids) points to any more; the number removed.

    Kept: every defined id, and the copy each defined id holds now (Gradio looks that copy up by
    its own id when the output's next value comes). Each removal is one dict operation, so a
    request of the same session running meanwhile sees either the copy or none; with none it
    adds the copy again (``SessionState.__setitem__``), never fails."""
    blocks = session.blocks_config.blocks
    live = set(defined)
    for i in defined:
        current = blocks.get(i)
        if current is not None:
            live.add(getattr(current, "_id", i))
    stale = [i for i in list(blocks) if i not in live]
    for i in stale:
        blocks.pop(i, None)
        session.config_values.pop(i, None)
    return len(stale)


def prune_sessions(state_holder, defined: set[int]) -> int:
    """``drop_stale_copies`` over every session a Gradio ``StateHolder`` keeps."""
    return sum(drop_stale_copies(s, defined) for s in list(state_holder.session_data.values()))


def start_pruning(demo, every_s: float = PRUNE_EVERY_S, *,
                  also: Callable[[], object] | None = None) -> threading.Thread:
    """Prune the sessions of ``demo`` (a ``gr.Blocks``, launched now or later) every ``every_s``
    seconds, in a daemon thread, and run ``also`` (another bound, e.g. on the rendered pages)
    as often. The app defines its components once (no ``gr.render``), so the ids it has when
    this is called are all the page's."""
    defined = set(demo.blocks)

    def loop() -> None:
        while True:
            time.sleep(every_s)
            if also is not None:
                try:
                    also()
                except Exception:  # noqa: BLE001 - a bound that failed once: say so, go on
                    log.exception("pruning failed")
            app = getattr(demo, "server_app", None)
            if app is None:
                continue
            try:
                n = prune_sessions(app.state_holder, defined)
            except Exception:  # a Gradio that changed its internals: say so, keep serving
                log.exception("pruning the sessions' component copies failed; stopped")
                return
            if n:
                log.debug("dropped %d stale component copies", n)

    t = threading.Thread(target=loop, name="session-pruner", daemon=True)
    t.start()
    return t
