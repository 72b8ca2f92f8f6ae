"""Decoding a plan: greedy generation from input embeddings (text and memory slots), streamed.

Decoding stops on a looping 4-gram (``engine.answer.guard``); ``GenerationResult.stop`` says why
generation ended (eos, length, time, repeat). ``generate`` is one call of ``model.generate``;
``Streamed`` with a worker hands the plan to the model's generation worker
(``engine.serving.worker``), which decodes the asks arriving together as one batch with the
same tokens, stop rules and processors (a request built by ``worker_request``), and cancels the
ask when its stream is closed (the client went away)."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Iterator

import torch
from transformers import (LogitsProcessorList, NoRepeatNGramLogitsProcessor,
                          RepetitionPenaltyLogitsProcessor, StoppingCriteriaList)

from engine.answer.guard import DECODE, GuardedStreamer, RepeatStop
from engine.answer.measure import FirstToken, TokenLogProbs
from engine.memory.backbone import Backbone
from engine.serving.request import GenerationOutcome, GenerationRequest
from engine.serving.worker import GenerationWorker


@dataclass(frozen=True)
class Plan:
    """A mode's prompt, ready to generate from: the model that generates, its input embedding
    pieces, the slot mask and the gate (``aligner``; None: no gate)."""

    model: Backbone
    pieces: list[torch.Tensor]
    slot_mask: torch.Tensor | None = None
    aligner: object | None = None

    def streamed(self, decoding: "Decoding", worker=None) -> "Streamed":
        """This plan decoded as ``decoding`` says, streamed, by ``worker`` when given (a served
        reader's plan, ``remote_decoding.ChatPlan``, answers the same call)."""
        return Streamed(self, decoding, worker)


@dataclass(frozen=True)
class Decoding:
    """How a plan is decoded (greedy): token and time limits, the loop stop, penalties."""

    max_new_tokens: int = 128
    max_time: float | None = None  # seconds of generation at most (Settings.request_timeout_s)
    guard: bool = True  # stop on a looping 4-gram (engine.answer.guard)
    repetition_penalty: float = 1.0  # 1.0 = off
    no_repeat_ngram: int = 0  # 0 = off


@dataclass
class GenerationResult:
    text: str
    prefill_tokens: int
    generated_tokens: int
    first_token_at: float | None
    loops: torch.Tensor | None = None  # [n_slots, n_gated_layers] when the gate ran
    stop: str = "eos"  # why generation ended: eos | length | time | loop (cut off) | repeat
    # log-probability of each generated token as chosen (greedy); None: not known (a served
    # reader that returns none)
    logprobs: list[float] | None = None

    @property
    def cut(self) -> bool:
        """Stopped by the token or time limit, not by the model (nor by the repetition stop)."""
        return self.stop in ("length", "time")


def _eos_ids(backbone: Backbone) -> set[int]:
    ids = backbone.model.generation_config.eos_token_id
    ids = [ids] if isinstance(ids, int) else list(ids or [])
    if backbone.tokenizer.eos_token_id is not None:
        ids.append(backbone.tokenizer.eos_token_id)
    return set(ids)


@torch.no_grad()
def generate(backbone: Backbone, pieces: list[torch.Tensor], *, slot_mask: torch.Tensor | None = None,
             aligner=None, max_new_tokens: int = 128,
             max_time: float | None = None, streamer=None, guard: bool = True,
             repetition_penalty: float = 1.0, no_repeat_ngram: int = 0) -> GenerationResult:
    """Greedy generation from concatenated input embeddings [n, d] (text and slots).

    ``repetition_penalty`` and ``no_repeat_ngram`` are transformers' own logits processors
    (CTRL's penalty on tokens already generated; a ban on repeating an n-gram); with
    ``inputs_embeds`` they see the generated tokens only, never the prompt's.

    ``streamer``: a transformers streamer fed the new tokens as they come (a ``GuardedStreamer``
    is given this call's guard); ``guard``: stop on a loop (``RepeatStop``), cutting it off."""
    embeds = torch.cat(pieces).unsqueeze(0).to(backbone.device, backbone.dtype)
    mask = torch.ones(embeds.shape[:2], dtype=torch.long, device=backbone.device)
    first, logprobs = FirstToken(), TokenLogProbs()
    stop = RepeatStop()
    kwargs = dict(inputs_embeds=embeds, attention_mask=mask, max_new_tokens=max_new_tokens,
                  do_sample=False, logits_processor=LogitsProcessorList([first, logprobs]),
                  pad_token_id=backbone.tokenizer.pad_token_id)
    if repetition_penalty != 1.0:
        kwargs["repetition_penalty"] = repetition_penalty
    if no_repeat_ngram:
        kwargs["no_repeat_ngram_size"] = no_repeat_ngram
    if guard:
        kwargs["stopping_criteria"] = StoppingCriteriaList([stop])
    if streamer is not None:
        kwargs["streamer"] = streamer
        if hasattr(streamer, "guard"):
            streamer.guard = stop if guard else None
    if max_time is not None:  # a wall-clock cap (seconds): generation stops, keeping its text
        kwargs["max_time"] = max_time
    loops = None
    if aligner is not None and slot_mask is not None and slot_mask.any():
        with aligner.attached(backbone.model), aligner.slots(slot_mask.unsqueeze(0).to(backbone.device)):
            out = backbone.model.generate(**kwargs)
        loops = aligner.last_loops[0] if aligner.last_loops is not None else None
    else:
        out = backbone.model.generate(**kwargs)
    new = out[0].tolist()  # with inputs_embeds only, generate returns just the new tokens
    return _result(backbone, new, stop, max_new_tokens, embeds.shape[1], first.at, loops,
                   logprobs.values)


def _result(backbone: Backbone, new: list[int], stop: RepeatStop, max_new_tokens: int,
            prefill_tokens: int, first_token_at: float | None,
            loops: torch.Tensor | None, logprobs: list[float]) -> GenerationResult:
    """The result of a generation that gave the token ids ``new``, and why it ended."""
    text = backbone.tokenizer.decode(new[: len(new) - stop.trim], **DECODE).strip()
    if stop.fired:
        why = stop.fired
    elif new and new[-1] in _eos_ids(backbone):
        why = "eos"
    elif len(new) >= max_new_tokens:
        why = "length"
    else:
        why = "time"
    return GenerationResult(text=text, prefill_tokens=prefill_tokens, generated_tokens=len(new),
                            first_token_at=first_token_at, loops=loops, stop=why,
                            logprobs=logprobs[:len(new)])


def worker_request(plan: Plan, decoding: Decoding,
                   streamer=None) -> tuple[GenerationRequest, RepeatStop]:
    """What ``generate`` hands ``model.generate``, as a generation worker's request: the same
    prompt, processors (in ``generate``'s order), loop stop, eos ids and limits; and its loop
    stop (which says what was cut off)."""
    stop = RepeatStop()
    processors = LogitsProcessorList()
    if decoding.repetition_penalty != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(decoding.repetition_penalty))
    if decoding.no_repeat_ngram:
        processors.append(NoRepeatNGramLogitsProcessor(decoding.no_repeat_ngram))
    processors.append(TokenLogProbs())  # last: it reads the scores the token is chosen from
    if streamer is not None and hasattr(streamer, "guard"):
        streamer.guard = stop if decoding.guard else None
    eos = plan.model.model.generation_config.eos_token_id
    eos = [eos] if isinstance(eos, int) else list(eos or [])
    gated = plan.aligner is not None and plan.slot_mask is not None
    request = GenerationRequest(
        inputs_embeds=torch.cat(plan.pieces), max_new_tokens=decoding.max_new_tokens,
        max_time=decoding.max_time, eos_token_ids=frozenset(eos), logits_processor=processors,
        stopping_criteria=[stop] if decoding.guard else [], streamer=streamer,
        slot_mask=plan.slot_mask if gated else None, aligner=plan.aligner if gated else None)
    return request, stop


def worker_result(plan: Plan, decoding: Decoding, outcome: GenerationOutcome,
                  stop: RepeatStop, request: GenerationRequest) -> GenerationResult:
    """The result of ``request`` (built by ``worker_request``: its last processor recorded the
    tokens' log-probabilities)."""
    logprobs = request.logits_processor[-1].values
    return _result(plan.model, outcome.tokens, stop, decoding.max_new_tokens,
                   outcome.prefill_tokens, outcome.first_token_at, outcome.loops,
                   logprobs)


def run_plan(plan: Plan, decoding: Decoding, streamer=None) -> GenerationResult:
    """Generate from ``plan`` as ``decoding`` says."""
    return generate(plan.model, plan.pieces, slot_mask=plan.slot_mask, aligner=plan.aligner,
                    max_new_tokens=decoding.max_new_tokens, max_time=decoding.max_time,
                    streamer=streamer, guard=decoding.guard,
                    repetition_penalty=decoding.repetition_penalty,
                    no_repeat_ngram=decoding.no_repeat_ngram)


def stripped(chunks: Iterator[str]) -> Iterator[str]:
    """The chunks with the answer's leading and trailing whitespace left out (trailing space is
    held back until text follows it), so that they join to the final answer text."""
    started, pending = False, ""
    for c in chunks:
        if not started:
            c = c.lstrip()
            if not c:
                continue
            started = True
        c = pending + c
        body = c.rstrip()
        pending = c[len(body):]
        if body:
            yield body


class Streamed:
    """One generation from a plan, streamed: iterating yields the answer's text chunks as they
    are generated (by ``worker``, the model's generation worker, with the other asks of the
    moment; without one, by ``generate`` in a thread of its own; an error there is raised in the
    iterating thread), after which ``result`` holds the ``GenerationResult``. Closing the
    iteration early (the client went away) takes the ask out of the worker's batch."""

    def __init__(self, plan: Plan, decoding: Decoding, worker: GenerationWorker | None = None):
        self.plan, self.decoding, self.worker = plan, decoding, worker
        self.result: GenerationResult | None = None

    def __iter__(self) -> Iterator[str]:
        streamer = GuardedStreamer(self.plan.model.tokenizer)
        if self.worker is not None:
            yield from self._batched(streamer)
            return
        box: dict = {}

        def work() -> None:
            try:
                box["result"] = run_plan(self.plan, self.decoding, streamer)
            except BaseException as e:  # re-raised in the caller's thread below
                box["error"] = e
                streamer.end()

        worker = threading.Thread(target=work, name="answer-generation", daemon=True)
        worker.start()
        yield from stripped(streamer)
        worker.join()
        if "error" in box:
            raise box["error"]
        self.result = box["result"]

    def _batched(self, streamer: GuardedStreamer) -> Iterator[str]:
        request, stop = worker_request(self.plan, self.decoding, streamer)
        ticket = self.worker.submit(request)
        try:
            yield from stripped(streamer)
        except BaseException:  # closed early (GeneratorExit) or failed: leave the batch
            ticket.cancel()
            raise
        self.result = worker_result(self.plan, self.decoding, ticket.result(), stop,
                                    request)
