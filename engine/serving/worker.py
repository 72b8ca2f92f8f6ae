"""The generation worker of one loaded model: continuous batching of the asks' greedy decoding.

Asks submit a ``GenerationRequest`` and get a ``Ticket``. One thread per model runs the loop:
take the requests waiting (up to ``max_batch`` sequences in all), prefill each alone (on the
worker's prefill thread, so that a long prompt's prefill does not hold the running streams:
they go on stepping meanwhile) and add it to a running batch of sequences of about its length
(``engine.serving.batch``), run one decoding step for each batch, give every sequence its
token (streamed to its own streamer), and let the sequences that ended go; a step's tokens are
chosen for the whole batch at once and read to the host once (``engine.serving.batch.choose``);
a cancelled ticket leaves before the next step. Decoding a small model on a CPU is bound by
reading its weights for every step, so a step for eight sequences costs little more than a step
for one.

Memory mode. The ArcAligner's selective LoRA and slot gates act only in the armed forward (the
prefill, whose length equals the slot mask's); decoding steps pass through its wrappers
unchanged (engine.memory.aligner and gated_layer, "KV cache"). So a memory-mode sequence is
prefilled alone, with its slots armed in the worker's thread (the slot context is
thread-local), exactly as an unbatched ``generate`` prefills it, and its gate loops and loop
counts stay its own; from its first decoding step on it is an ordinary cached sequence and
shares the batch with text and full-mode sequences. Prefills are not batched, in any mode: the
gate's updates are per slot and its loop counts per row, so a batched memory prefill would be
the same arithmetic, but a left-padded prefill differs from the prompt alone in the last digits
(the masked attention and matrix kernels change with the shape), and greedy answers must stay
those of the unbatched path; and a batch's gate loops would all wait for its slowest slot.

Why not transformers' continuous batching (``generate_batch`` / ``init_continuous_batching``,
transformers 5.23): it runs on this CPU and its greedy tokens matched ``generate`` on two
prompts, but (1) a request is a list of token ids only: memory mode's prompt is input
embeddings (slots) and its prefill needs the aligner armed in the thread that runs it; (2) a
request has no stopping criteria of its own (only max new tokens and eos): the loop stop
(engine.answer.generation.cleanup) and the time limit cannot be expressed; (3) its paged
cache was slow on this CPU (measured in docs/results.md, section "Transformers' continuous
batching, tried"). Transformers' ``DynamicCache``, logits processors, stopping criteria and
streamers are used as they are.
"""
from __future__ import annotations

import atexit
import logging
import threading
import weakref
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from engine.serving.batch import Choice, DecodeBatch, Row, choose
from engine.serving.request import GenerationOutcome, GenerationRequest, Ticket

log = logging.getLogger(__name__)

# A sequence joins a running batch whose cache is at most this many times longer or shorter
# than its own, else it starts a batch of its own (each batch is one step per round): a
# full-mode prompt of thousands of tokens would otherwise pad every short text answer of the
# batch to its length, in memory and in every step's attention.
LENGTH_RATIO = 2


@dataclass
class Prefilled:
    """What the prefill thread hands the loop for one request."""
    ticket: Ticket
    row: Row | None = None
    cache: DynamicCache | None = None
    stop: str | None = None
    error: BaseException | None = None


def submit_and_wait(worker, request: GenerationRequest) -> GenerationOutcome:
    """``worker.submit(request)``'s outcome; an interrupted wait (the caller's generator
    closed, an exception in its thread) cancels the request. Every worker's ``generate``."""
    ticket = worker.submit(request)
    try:
        return ticket.result()
    except BaseException:
        ticket.cancel()
        raise


class GenerationWorker:
    """Decodes the requests for ``model`` in one batch of at most ``max_batch`` sequences;
    more wait (first come, first served) until a sequence ends."""

    def __init__(self, model: torch.nn.Module, max_batch: int = 8) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self.model = model
        self.max_batch = max_batch
        self._waiting: deque[Ticket] = deque()
        self._wakeup = threading.Condition()
        self._thread: threading.Thread | None = None
        # one prefill at a time, beside the loop's decoding steps
        self._prefill_thread = ThreadPoolExecutor(1, thread_name_prefix="generation-prefill")
        self._closed = False
        self.active = 0  # sequences in the running batch (read by tests and benches)
        # The loop thread is a daemon: stopped at exit, it would be killed inside a torch call
        # while the interpreter finalizes (the process aborts: "terminate called ...").
        atexit.register(_close_at_exit, weakref.ref(self))

    # -- the asks' side --------------------------------------------------------------------------
    def submit(self, request: GenerationRequest) -> Ticket:
        """Queue ``request``; the worker thread starts with the first one, and again after a
        loop that died (a bug or a broken model: its rows failed, the waiting ones wait on)."""
        ticket = Ticket(request, self._wake)
        with self._wakeup:
            if self._closed:
                raise RuntimeError("this generation worker is closed")
            self._waiting.append(ticket)
            if self._thread is None or not self._thread.is_alive():
                self._start()
            self._wakeup.notify()
        return ticket

    def _start(self) -> None:
        """A new loop thread (the caller holds ``_wakeup``)."""
        self._thread = threading.Thread(target=self._run, name="generation-worker", daemon=True)
        self._thread.start()

    def generate(self, request: GenerationRequest) -> GenerationOutcome:
        """Submit and wait (``submit_and_wait``)."""
        return submit_and_wait(self, request)

    def close(self) -> None:
        """Stop the thread after its current step; waiting and running requests get an error."""
        with self._wakeup:
            self._closed = True
            self._wakeup.notify()
            thread = self._thread
        if thread is not None:
            thread.join()
        self._prefill_thread.shutdown(wait=False)
        with self._wakeup:  # a loop that had died left these
            waiting = list(self._waiting)
            self._waiting.clear()
        for ticket in waiting:
            self._fail(ticket, RuntimeError("the generation worker stopped"))

    def _wake(self) -> None:
        with self._wakeup:
            self._wakeup.notify()

    # -- the worker's side -----------------------------------------------------------------------
    def _take(self, room: int, block: bool) -> list[Ticket]:
        with self._wakeup:
            while block and not self._waiting and not self._closed:
                self._wakeup.wait()
            taken = []
            while self._waiting and len(taken) < room:
                taken.append(self._waiting.popleft())
            return taken

    def _run(self) -> None:
        """The loop. Prefills run on the worker's prefill thread (``_prefilled``), so a long
        prompt's prefill never holds the running streams' steps: the loop steps its batches
        meanwhile and adds the prefilled sequence when it is ready. Each prefill and each
        batch's step is guarded on its own (a failure fails the rows it touched, nothing else);
        should the loop itself fail, its running rows fail, every stream ends, and the requests
        still waiting go to a new loop (started here, or by the next ``submit``)."""
        batches: list[DecodeBatch] = []
        pending: list[Future] = []
        error: BaseException = RuntimeError("the generation worker stopped")
        try:
            with torch.no_grad():
                while not self._closed:
                    room = self.max_batch - self.active - len(pending)
                    for ticket in self._take(room, block=not batches and not pending):
                        pending.append(self._prefill_thread.submit(self._prefilled, ticket))
                    if pending and not batches:  # nothing to step: wait for a prefill
                        wait(pending, return_when=FIRST_COMPLETED)
                    for done in [f for f in pending if f.done()]:
                        pending.remove(done)
                        self._admit(done.result(), batches)
                    batches = [b for b in batches if self._step(b)]
                    self.active = sum(len(b) for b in batches)
        except BaseException as e:  # noqa: BLE001 - a bug: its rows fail, the worker goes on
            log.exception("the generation loop failed; its sequences fail, a new loop starts")
            error = e
        finally:
            rows = [r for b in batches for r in b.rows]
            for done in pending:  # prefills under way finish first (their rows fail too)
                prefilled = done.result()
                if prefilled.row is not None:
                    rows.append(prefilled.row)
                else:
                    self._fail(prefilled.ticket, prefilled.error or error)
            for row in rows:
                self._end(row, None, error)
            self.active = 0
            with self._wakeup:
                self._thread = None
                if self._closed:
                    waiting = list(self._waiting)
                    self._waiting.clear()
                else:
                    waiting = []
                    if self._waiting:
                        self._start()
            for ticket in waiting:
                self._fail(ticket, error)

    def _prefilled(self, ticket: Ticket) -> Prefilled:
        """On the prefill thread: the request's prompt prefilled alone and its first token
        chosen, or why not (cancelled, or its error: this request's failure, not the batch's).
        Never raises."""
        if ticket.cancelled:
            return Prefilled(ticket, stop="cancelled")
        row = None
        try:
            with torch.no_grad():  # grad mode is per thread
                row, cache, logits = self._prefill(ticket)
                return Prefilled(ticket, row, cache, stop=self._advance(row, logits))
        except Exception as e:  # noqa: BLE001 - handed to the loop, which fails this request
            return Prefilled(ticket, row, error=e)

    def _admit(self, p: Prefilled, batches: list[DecodeBatch]) -> None:
        """A prefilled request joins the batch of sequences of about its length
        (``LENGTH_RATIO``), or starts one; a request that failed or ended at its first token
        leaves. A failed join fails this request and the batch it broke, nothing else."""
        if p.row is None:
            if p.error is not None:  # no row: its stream still has to end, or its reader waits
                self._fail(p.ticket, p.error)
            else:
                p.ticket.finish(GenerationOutcome([], p.ticket.request.prompt_length, None,
                                                  "cancelled"))
            return
        row = p.row
        if p.error is not None or p.stop is not None:
            self._end(row, p.stop, p.error)
            return
        for batch in batches:
            if max(batch.length, row.cached) <= LENGTH_RATIO * min(batch.length, row.cached):
                try:
                    batch.join(row, p.cache)
                except Exception as e:  # the batch's cache may be half joined: all of it fails
                    log.exception("joining a decoding batch failed")
                    for r in dict.fromkeys([*batch.rows, row]):
                        self._end(r, None, e)
                    batches.remove(batch)
                    return
                self.active += 1
                return
        batches.append(DecodeBatch(row, p.cache))
        self.active += 1

    def _prefill(self, ticket: Ticket) -> tuple[Row, DynamicCache, torch.Tensor]:
        """The prompt's forward pass alone, as ``generate`` runs it (all-ones mask, fresh cache,
        logits of the last position only); memory slots armed in this thread."""
        req = ticket.request
        device = self.model.device
        if req.streamer is not None:  # ``generate`` first hands the streamer the prompt's ids
            req.streamer.put(torch.zeros((1, 0), dtype=torch.long))
        row = Row(ticket, cached=req.prompt_length, started=time.monotonic(),
                  prefill_started_at=time.perf_counter())
        cache = DynamicCache(config=self.model.config)
        if req.inputs_embeds is not None:
            prompt = dict(inputs_embeds=req.inputs_embeds.unsqueeze(0).to(device, self.model.dtype))
        else:
            prompt = dict(input_ids=torch.tensor([req.input_ids], dtype=torch.long, device=device))
        kwargs = dict(prompt, attention_mask=torch.ones(1, req.prompt_length, dtype=torch.long,
                                                        device=device),
                      past_key_values=cache, use_cache=True, logits_to_keep=1)
        aligner, mask = req.aligner, req.slot_mask
        if aligner is not None and mask is not None and bool(mask.any()):
            with aligner.attached(self.model), aligner.slots(mask.unsqueeze(0).to(device)):
                out = self.model(**kwargs)
                loops = aligner.last_loops
            row.loops = loops[0] if loops is not None else None
        else:
            out = self.model(**kwargs)
        row.first_token_at = time.perf_counter()
        return row, cache, out.logits[:, -1].to(dtype=torch.float32)

    def _advance(self, row: Row, logits: torch.Tensor) -> str | None:
        """Give ``row`` its first token from its prefill's logits [1, V]; why it ends, or None."""
        return self._pushed(row, choose([row], logits), 0, logits[0])

    def _pushed(self, row: Row, choice: Choice, i: int, logits: torch.Tensor) -> str | None:
        """Hand row ``i`` of ``choice`` to ``row`` (``logits``: its own [V]); why it ends, or
        None. A cancelled row takes no token; a row whose processor raised raises that error."""
        if row.ticket.cancelled:
            return "cancelled"
        if choice.errors[i] is not None:
            raise choice.errors[i]
        return row.push(choice.tokens[i], logits, choice.logprobs[i])

    def _step(self, batch: DecodeBatch) -> bool:
        """One decoding step of the batch; the rows that end (or fail) leave it. False when
        none is left. A failed step fails the batch's rows (the ones it touched) only."""
        try:
            return self._step_rows(batch)
        except Exception as e:
            log.exception("generation step failed")
            for row in batch.rows:
                if not row.ticket.done:
                    self._end(row, None, e)
            return False

    def _step_rows(self, batch: DecodeBatch) -> bool:
        keep = []
        live = []
        for i, row in enumerate(batch.rows):  # a client that went away leaves before the step
            if row.ticket.cancelled:
                self._end(row, "cancelled")
            else:
                live.append(i)
        batch.keep(live)
        if not live:
            return False
        logits = batch.step(self.model)
        choice = batch.choose(logits)  # the step's one host read
        for i, row in enumerate(batch.rows):
            try:
                stop = self._pushed(row, choice, i, logits[i])
            except Exception as e:  # e.g. its streamer or stopping criterion raised
                self._end(row, None, e)
                continue
            if stop is None:
                keep.append(i)
            else:
                self._end(row, stop)
        batch.keep(keep)
        return bool(keep)

    @staticmethod
    def _end_stream(ticket: Ticket) -> None:
        """End the ticket's stream (its reader stops waiting); a streamer that raises is logged,
        never left open."""
        streamer = ticket.request.streamer
        if streamer is None:
            return
        try:
            streamer.end()
        except Exception:  # noqa: BLE001 - the outcome still reaches the ticket
            log.exception("ending a generation stream failed")

    @classmethod
    def _fail(cls, ticket: Ticket, error: BaseException) -> None:
        """A request that never got a row: its stream ends and its ticket gets ``error``."""
        cls._end_stream(ticket)
        ticket.fail(error)

    @classmethod
    def _end(cls, row: Row, stop: str | None, error: BaseException | None = None) -> None:
        """Close the row's stream and hand its outcome (or error) to its ticket."""
        cls._end_stream(row.ticket)
        if error is not None:
            row.ticket.fail(error)
        else:
            row.ticket.finish(row.outcome(stop))


def worker_for(cache: dict, model: torch.nn.Module, max_batch: int) -> GenerationWorker:
    """The one worker of ``model`` kept in ``cache`` (a runtime's cache dict)."""
    workers = cache.setdefault("generation_workers", {})
    worker = workers.get(id(model))
    if worker is None or worker.model is not model:
        worker = workers[id(model)] = GenerationWorker(model, max_batch)
    return worker


def _close_at_exit(ref: weakref.ref) -> None:
    worker = ref()
    if worker is not None and not worker._closed:
        worker.close()
