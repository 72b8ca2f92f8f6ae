"""The app's background memory writer, held back while a test looks at a manual whose memories
are being written."""
from __future__ import annotations

import threading


def hold_memory_writer(rt, monkeypatch, timeout_s: float):
    """The app's background memory writer, idle first, then made to wait before each write
    until the returned event is set (a manual stays "memories being written" meanwhile)."""
    from app.ui import memory_writer

    writer = memory_writer(rt)
    assert writer.wait_idle(timeout_s)
    gate = threading.Event()
    write = writer.worker.write_document

    def held(doc_id, progress, store):
        gate.wait(timeout_s)
        return write(doc_id, progress, store)

    monkeypatch.setattr(writer.worker, "write", held)
    return writer, gate
