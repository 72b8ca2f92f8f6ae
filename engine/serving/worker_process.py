"""The generation worker in a process of its own: the decoding loop away from the app's Python work.

In one process the decoding loop (``engine.serving.worker``) and the app's per-ask Python work
(route figures, tables, history, the streamed page updates) take turns on one interpreter lock,
and the decoding steps wait. ``ProcessWorker`` answers the asks' side of ``GenerationWorker``
(``submit`` -> ``Ticket``, ``generate``, ``close``, ``active``) and runs a ``GenerationWorker``
over a copy of the model in a child process (``multiprocessing``, spawn), which has a lock of
its own.

A request crosses the pipe as plain data (pickled): the prompt, its limits and eos ids, its
logits processors and stopping criteria, which run in the child as they would here; their state
comes back with the outcome (the tokens' log-probabilities, the loop stop's cut), so the result
reads as after an in-process run. The child sends each token as it is chosen; it is fed to the
request's streamer here, so turning tokens into text is this process's work, not the loop's. A
ticket cancelled here is cancelled there (the row leaves before the child's next step).

Memory-mode requests (an ArcAligner arms the prefill) are decoded here, by an in-process worker
over the same model: the aligner and its slots belong to the trained parts of this process.

No orphan: the child is a daemon (ended when this process exits), and it stops when its pipe
from here closes, which the operating system does when this process dies in any way. A child
that dies fails the requests under way with one line; the next ``submit`` starts a new one.
"""
from __future__ import annotations

import atexit
import dataclasses
import itertools
import logging
import multiprocessing
import pickle
import threading
import weakref

import torch

from engine.serving.request import GenerationRequest, Ticket
from engine.serving.worker import GenerationWorker, submit_and_wait

log = logging.getLogger(__name__)


class GenerationProcessError(RuntimeError):
    """The generation process ended (or failed to start) while requests were under way."""


class ProcessWorker:
    """The generation worker of ``model`` run in a child process that loads the same model from
    ``settings`` (whose ``backbone`` names it); at most ``max_batch`` sequences decode together
    there, as in ``GenerationWorker``."""

    def __init__(self, model: torch.nn.Module, settings, max_batch: int = 8) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self.model = model
        self.settings = settings
        self.max_batch = max_batch
        self.local = GenerationWorker(model, max_batch)  # memory-mode requests (docstring)
        self._lock = threading.Lock()  # the tickets, the child and the pipe's sending end
        self._tickets: dict[int, tuple[Child, Ticket]] = {}  # key -> the child deciding it
        self._ids = itertools.count()
        self._child: Child | None = None
        self._closed = False
        atexit.register(_close_at_exit, weakref.ref(self))

    @property
    def active(self) -> int:
        """Requests submitted and not finished (the child's running and waiting ones), and the
        in-process worker's running sequences."""
        return len(self._tickets) + self.local.active

    @property
    def pid(self) -> int | None:
        """The child process's id (None before the first request, or after it ended)."""
        child = self._child
        return child.process.pid if child is not None else None

    def start(self) -> None:
        """Start the child now (it loads the model while nothing waits on it), if not running."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this generation worker is closed")
            if self._child is None:
                self._child = Child.start(self, self.settings, self.max_batch)

    def submit(self, request: GenerationRequest) -> Ticket:
        """Queue ``request`` in the child (started with the first request, and again after one
        that ended), or in the in-process worker when it arms memory slots."""
        if request.aligner is not None:
            return self.local.submit(request)
        sent = dataclasses.replace(request, streamer=None)
        self.start()
        with self._lock:
            child, key = self._child, next(self._ids)
            if child is None:  # closed meanwhile, or ended at once
                raise GenerationProcessError("the generation process is gone")
            ticket = Ticket(request, lambda: child.cancel(key))
            self._tickets[key] = child, ticket
            try:
                child.send(("ask", key, sent))
            except (OSError, ValueError) as e:  # the child is gone: its reader fails the rest
                del self._tickets[key]
                raise GenerationProcessError(f"the generation process is gone: {e}") from None
        return ticket

    def generate(self, request: GenerationRequest):
        """Submit and wait (``engine.serving.worker.submit_and_wait``)."""
        return submit_and_wait(self, request)

    def close(self) -> None:
        """Stop the child (its pipe closed: it ends its loop and exits) and the in-process
        worker; requests under way get an error."""
        with self._lock:
            self._closed = True
            child, self._child = self._child, None
        if child is not None:
            child.stop()
        self.local.close()

    # -- what the child sends (on the reading thread of ``Child``) -----------------------------
    def _ticket(self, key: int, remove: bool = False) -> Ticket | None:
        with self._lock:
            held = self._tickets.pop(key, None) if remove else self._tickets.get(key)
        return held[1] if held is not None else None

    def _piece(self, key: int, ids: list) -> None:
        ticket = self._ticket(key)
        if ticket is not None and ticket.request.streamer is not None:
            ticket.request.streamer.put(torch.tensor(ids, dtype=torch.long))

    def _done(self, key: int, outcome, processors, criteria) -> None:
        ticket = self._ticket(key, remove=True)
        if ticket is None:
            return
        request = ticket.request
        # the child's processors and criteria ran on this request: their state is its state
        for mine, theirs in zip(request.logits_processor, processors):
            mine.__dict__.update(theirs.__dict__)
        for mine, theirs in zip(request.stopping_criteria, criteria):
            mine.__dict__.update(theirs.__dict__)
        _end_stream(request)
        ticket.finish(outcome)

    def _failed(self, key: int, error: BaseException) -> None:
        ticket = self._ticket(key, remove=True)
        if ticket is not None:
            _end_stream(ticket.request)
            ticket.fail(error)

    def _ended(self, child: "Child", why: str) -> None:
        """The child's pipe closed: every request it held fails; the next submit starts one."""
        with self._lock:
            if self._child is child:
                self._child = None
            lost = [t for key, (c, t) in list(self._tickets.items()) if c is child]
            self._tickets = {k: held for k, held in self._tickets.items() if held[0] is not child}
        for ticket in lost:
            _end_stream(ticket.request)
            ticket.fail(GenerationProcessError(why))


def _end_stream(request: GenerationRequest) -> None:
    if request.streamer is not None:
        try:
            request.streamer.end()
        except Exception:  # noqa: BLE001 - the outcome still reaches the ticket
            log.exception("ending a generation stream failed")


class Child:
    """One child process, the pipe to it and the thread here that reads what it sends."""

    def __init__(self, owner: ProcessWorker, process, conn) -> None:
        self.owner = owner
        self.process = process
        self.conn = conn
        self._send_lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, name="generation-process-reader",
                                       daemon=True)

    @classmethod
    def start(cls, owner: ProcessWorker, settings, max_batch: int) -> "Child":
        context = multiprocessing.get_context("spawn")
        mine, theirs = context.Pipe(duplex=True)
        process = context.Process(target=child_main, args=(theirs, settings, max_batch),
                                  name="generation-process", daemon=True)
        process.start()
        theirs.close()  # only the child holds its end: it reads EOF when this process dies
        child = cls(owner, process, mine)
        child.reader.start()
        return child

    def send(self, message: tuple) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self._send_lock:
            self.conn.send_bytes(data)

    def cancel(self, key: int) -> None:
        """Take request ``key`` out of the child's batch (nothing to do when the child is gone:
        its requests have failed)."""
        try:
            self.send(("cancel", key))
        except (OSError, ValueError):
            pass

    def stop(self) -> None:
        """Ask the child to end (it finishes its step, fails its requests and exits; its pipe
        closes, which ends the reading thread here) and wait for it."""
        try:
            self.send(("stop",))
        except (OSError, ValueError):  # already gone
            pass
        self.process.join(timeout=60)
        if self.process.is_alive():  # a step that does not end: do not leave it running
            self.process.kill()
            self.process.join()
        if self.reader is not threading.current_thread():
            self.reader.join()
        self.conn.close()

    def _read(self) -> None:
        why = "the generation process stopped"
        try:
            while True:
                message = pickle.loads(self.conn.recv_bytes())
                kind = message[0]
                if kind == "piece":
                    self.owner._piece(message[1], message[2])
                elif kind == "done":
                    self.owner._done(*message[1:])
                elif kind == "failed":
                    self.owner._failed(message[1], message[2])
                elif kind == "start failed":
                    why = f"the generation process could not start: {message[1]}"
                    break
        except (EOFError, OSError):  # closed by ``stop``, or the child died
            self.process.join(timeout=60)
            code = self.process.exitcode
            if code not in (0, None):
                why = f"the generation process ended unexpectedly (exit code {code})"
        except Exception as e:  # noqa: BLE001 - a message that cannot be read: say it
            log.exception("reading from the generation process failed")
            why = f"reading from the generation process failed: {e}"
        self.owner._ended(self, why)


# -- the child's side ---------------------------------------------------------------------------

class PieceSender:
    """The streamer of a request in the child: each token goes to the parent as it comes."""

    def __init__(self, send, key: int) -> None:
        self.send, self.key = send, key

    def put(self, ids: torch.Tensor) -> None:
        self.send(("piece", self.key, ids.tolist()))

    def end(self) -> None:  # the parent ends its streamer once the outcome is there
        pass


def child_main(conn, settings, max_batch: int) -> None:
    """The child process: load the model, then decode what the pipe brings until it closes."""
    from engine.memory.backbone import load_backbone

    send_lock = threading.Lock()

    def send(message: tuple) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with send_lock:
            try:
                conn.send_bytes(data)
            except (OSError, ValueError):  # the parent is gone: the reading loop ends too
                pass

    try:
        model = load_backbone(settings).model
    except Exception as e:  # noqa: BLE001 - said to the parent in one line
        send(("start failed", f"{type(e).__name__}: {e}"))
        return
    worker = GenerationWorker(model, max_batch)
    tickets: dict[int, object] = {}

    def answer(key: int, ticket) -> None:
        """Wait for the ticket; send its outcome with its processors' and criteria's state."""
        try:
            outcome = ticket.result()
        except BaseException as e:  # noqa: BLE001 - the request's failure, sent as it is
            send(("failed", key, _portable(e)))
        else:
            req = ticket.request
            send(("done", key, outcome, list(req.logits_processor),
                  list(req.stopping_criteria)))
        finally:
            tickets.pop(key, None)

    try:
        while True:
            message = pickle.loads(conn.recv_bytes())
            if message[0] == "ask":
                _, key, request = message
                request.streamer = PieceSender(send, key)
                ticket = tickets[key] = worker.submit(request)
                threading.Thread(target=answer, args=(key, ticket), daemon=True,
                                 name=f"generation-answer-{key}").start()
            elif message[0] == "cancel":
                ticket = tickets.get(message[1])
                if ticket is not None:
                    ticket.cancel()
            elif message[0] == "stop":
                break
    except (EOFError, OSError):  # the parent died (its end of the pipe closed)
        pass
    finally:
        worker.close()


def _portable(error: BaseException) -> BaseException:
    """``error`` if it survives pickling, else a RuntimeError with its words."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(error).__name__}: {error}")


def process_worker_for(cache: dict, model: torch.nn.Module, settings,
                       max_batch: int) -> ProcessWorker:
    """The one process worker of ``model`` kept in ``cache`` (a runtime's cache dict);
    ``settings`` load the same model in the child (``Runtime.model_settings``)."""
    workers = cache.setdefault("generation_processes", {})
    worker = workers.get(id(model))
    if worker is None or worker.model is not model:
        worker = workers[id(model)] = ProcessWorker(model, settings, max_batch)
    return worker


def _close_at_exit(ref: weakref.ref) -> None:
    worker = ref()
    if worker is not None and not worker._closed:
        worker.close()
