"""The app's background memory writer, held back while a test looks at a manual whose memories
are being written."""
from __future__ import annotations

import threading


def hold_memory_writer(rt, monkeypatch, timeout_s: float):
    """The app's background memory writer, idle first, then made to wait before each write
    until the returned event is set (a manual stays "memories being written" meanwhile). A
    write held when the writer is stopped (the app closing) is let go unwritten: its job is
    given back at once, as a stop between two batches gives it back."""
    from app.ui import memory_writer
    from engine.memory.worker import Stopped

    writer = memory_writer(rt)
    assert writer.wait_idle(timeout_s)
    gate = threading.Event()
    stopping = threading.Event()
    write, stop = writer.worker.write_document, writer.worker.stop

    def held(doc_id, progress, store):
        gate.wait(timeout_s)
        if stopping.is_set():
            raise Stopped()
        return write(doc_id, progress, store)

    def stop_and_let_go():
        stopping.set()
        stop()
        gate.set()

    monkeypatch.setattr(writer.worker, "write", held)
    monkeypatch.setattr(writer.worker, "stop", stop_and_let_go)
    return writer, gate
