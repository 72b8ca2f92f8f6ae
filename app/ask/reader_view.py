"""The reader line of the Ask tab: which model reads the manual's text to answer (the local
model's name, or the served model and its URL), whether its server answered when last checked
(at the page's start, then by each answer), and, with a served reader, that memory mode still
reads with the local backbone."""
from __future__ import annotations

import time

from app.shared.lines import md as _md

MEMORY_LOCAL = ("Memory mode answers with the local backbone: its memories go into the model as "
                "input embeddings, which a served model does not take.")


def reader_markdown(rt) -> str:
    """The reader line (the reader's ``title``: the model and where it runs; for a served
    reader its last check, ``RemoteReader.status``, checked now when it never was)."""
    if not rt.settings.reader_is_remote:
        return f"**Answers written by** {_md(rt.reader.title)}."
    label = _md(rt.reader_label)
    remote = rt.reader.remote
    status = remote.status or remote.check()
    when = time.strftime("%H:%M:%S", time.localtime(status.checked_at))
    if status.reachable:
        state = f"answered when last checked ({when})"
    else:
        state = f"**not reachable** when last checked ({when}): {_md(status.detail)}"
    return f"**Reader**: {label}, served; {state}. {MEMORY_LOCAL}"



def reader_line(s) -> str:
    """The reader line of app state ``s`` (a handler: ``app.shared.binding.bind``)."""
    return reader_markdown(s.rt)
