"""Decoding a plan: greedy generation from input embeddings (text and memory slots), streamed.

Decoding stops on a loop (``engine.serving.stops``); ``GenerationResult.stop`` says why
generation ended (eos, length, time, loop, repeat). The end-of-sequence ids (``eos_ids``) and the
logits processors (``processors``) are chosen here once, for both ways of decoding. ``generate`` is one call of ``model.generate``;
``Streamed`` with a worker hands the plan to the model's generation worker
(``engine.serving.worker``), which decodes the asks arriving together as one batch with the
same tokens, stop rules and processors (a request built by ``worker_request``), and cancels the
ask when its stream is closed (the client went away)."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Iterator

import torch
from transformers import (LogitsProcessorList, NoRepeatNGramLogitsProcessor,
                          RepetitionPenaltyLogitsProcessor, StoppingCriteriaList)

from engine.answer.generation.copying import copy_processor, span_index
from engine.answer.generation.streamer import DECODE, GuardedStreamer, stripped
from engine.answer.measure import FirstToken, TokenLogProbs
from engine.memory.backbone import Backbone
from engine.serving.request import GenerationOutcome, GenerationRequest, GenerationResult
from engine.serving.stops import RepeatStop
from engine.serving.worker import GenerationWorker


@dataclass(frozen=True)
class Plan:
    """A mode's prompt, ready to generate from: the model that generates, its input embedding
    pieces, the slot mask and the gate (``aligner``; None: no gate)."""

    model: Backbone
    pieces: list[torch.Tensor]
    slot_mask: torch.Tensor | None = None
    aligner: object | None = None

    def streamed(self, decoding: "Decoding", workers=None) -> "Streamed":
        """This plan decoded as ``decoding`` says, streamed, by the generation worker that
        ``workers(model)`` gives for its model (None: in a thread of its own). A served reader's
        plan (``engine.serving.remote_decoding.ChatPlan``) answers the same call."""
        return Streamed(self, decoding, workers(self.model.model) if workers is not None else None)


@dataclass(frozen=True)
class Decoding:
    """How a plan is decoded (greedy): token and time limits, the loop stop, penalties, and the
    text the answer must copy a span of (or None)."""

    max_new_tokens: int = 128
    max_time: float | None = None  # seconds of generation at most (Settings.request_timeout_s)
    guard: bool = True  # stop on a looping 4-gram (engine.answer.generation.cleanup)
    repetition_penalty: float = 1.0  # 1.0 = off
    no_repeat_ngram: int = 0  # 0 = off
    # the text the answer must be a span of (``engine.answer.generation.copying``); None: free
    copy_from: str | None = None


def eos_ids(backbone: Backbone) -> frozenset[int]:
    """The ids generation stops at: the model's generation config's (as ``model.generate``)."""
    ids = backbone.model.generation_config.eos_token_id
    return frozenset([ids] if isinstance(ids, int) else list(ids or []))


def processors(repetition_penalty: float = 1.0, no_repeat_ngram: int = 0,
               backbone: Backbone | None = None, copy_from: str | None = None
               ) -> LogitsProcessorList:
    """transformers' own logits processors for the penalties, in ``model.generate``'s order
    (CTRL's penalty on tokens already generated; a ban on repeating an n-gram), then, with
    ``copy_from``, the copy constraint (spans of that text in ``backbone``'s tokens); with
    ``inputs_embeds`` they see the generated tokens only, never the prompt's."""
    out = LogitsProcessorList()
    if repetition_penalty != 1.0:
        out.append(RepetitionPenaltyLogitsProcessor(repetition_penalty))
    if no_repeat_ngram:
        out.append(NoRepeatNGramLogitsProcessor(no_repeat_ngram))
    if copy_from:
        out.append(copy_processor(span_index(backbone.tokenizer, copy_from, eos_ids(backbone))))
    return out


@torch.no_grad()
def generate(plan: Plan, decoding: Decoding = Decoding(), streamer=None) -> GenerationResult:
    """Greedy generation from the plan's concatenated input embeddings [n, d] (text and slots),
    as ``decoding`` says (its penalties and ``copy_from``: ``processors``; ``guard``: stop on a
    loop, ``RepeatStop``, cutting it off).

    ``streamer``: a transformers streamer fed the new tokens as they come (a ``GuardedStreamer``
    is given this call's guard)."""
    backbone, slot_mask, aligner = plan.model, plan.slot_mask, plan.aligner
    max_new_tokens, guard = decoding.max_new_tokens, decoding.guard
    embeds = torch.cat(plan.pieces).unsqueeze(0).to(backbone.device, backbone.dtype)
    mask = torch.ones(embeds.shape[:2], dtype=torch.long, device=backbone.device)
    first, logprobs = FirstToken(), TokenLogProbs()
    stop = RepeatStop()
    kwargs = dict(inputs_embeds=embeds, attention_mask=mask, max_new_tokens=max_new_tokens,
                  do_sample=False,
                  # the log-probs last: they read the scores the token is chosen from
                  logits_processor=LogitsProcessorList(
                      [*processors(decoding.repetition_penalty, decoding.no_repeat_ngram,
                                   backbone, decoding.copy_from), first, logprobs]),
                  pad_token_id=backbone.tokenizer.pad_token_id)
    if guard:
        kwargs["stopping_criteria"] = StoppingCriteriaList([stop])
    if streamer is not None:
        kwargs["streamer"] = streamer
        if hasattr(streamer, "guard"):
            streamer.guard = stop if guard else None
    if decoding.max_time is not None:  # a wall-clock cap (seconds): it stops, keeping its text
        kwargs["max_time"] = decoding.max_time
    loops, prefill_started_at = None, time.perf_counter()
    if aligner is not None and slot_mask is not None and slot_mask.any():
        with aligner.attached(backbone.model), aligner.slots(slot_mask.unsqueeze(0).to(backbone.device)):
            out = backbone.model.generate(**kwargs)
        loops = aligner.last_loops[0] if aligner.last_loops is not None else None
    else:
        out = backbone.model.generate(**kwargs)
    new = out[0].tolist()  # with inputs_embeds only, generate returns just the new tokens
    outcome = GenerationOutcome(new, embeds.shape[1], first.at, "", loops, prefill_started_at)
    return _result(backbone, outcome, stop, max_new_tokens, logprobs.values)


def _result(backbone: Backbone, outcome: GenerationOutcome, stop: RepeatStop,
            max_new_tokens: int, logprobs: list[float]) -> GenerationResult:
    """The result of a generation that gave the token ids ``outcome.tokens``, and why it ended
    (``stop``'s reason, else the tokens': ``outcome.stop`` is not read)."""
    new = outcome.tokens
    text = backbone.tokenizer.decode(new[: len(new) - stop.trim], **DECODE).strip()
    if stop.fired:
        why = stop.fired
    elif new and (new[-1] in eos_ids(backbone) or new[-1] == backbone.tokenizer.eos_token_id):
        why = "eos"
    elif len(new) >= max_new_tokens:
        why = "length"
    else:
        why = "time"
    return GenerationResult(text=text, prefill_tokens=outcome.prefill_tokens,
                            generated_tokens=len(new), first_token_at=outcome.first_token_at,
                            loops=outcome.loops, stop=why, logprobs=logprobs[:len(new)],
                            prefill_started_at=outcome.prefill_started_at)


def worker_request(plan: Plan, decoding: Decoding,
                   streamer=None) -> tuple[GenerationRequest, RepeatStop]:
    """What ``generate`` hands ``model.generate``, as a generation worker's request: the same
    prompt, processors (in ``generate``'s order), loop stop, eos ids and limits; and its loop
    stop (which says what was cut off)."""
    stop = RepeatStop()
    if streamer is not None and hasattr(streamer, "guard"):
        streamer.guard = stop if decoding.guard else None
    gated = plan.aligner is not None and plan.slot_mask is not None
    request = GenerationRequest(
        inputs_embeds=torch.cat(plan.pieces), max_new_tokens=decoding.max_new_tokens,
        max_time=decoding.max_time, eos_token_ids=eos_ids(plan.model),
        logits_processor=processors(decoding.repetition_penalty, decoding.no_repeat_ngram,
                                    plan.model, decoding.copy_from),
        # the worker records what TokenLogProbs records, for its whole batch at once
        logprobs=True,
        stopping_criteria=[stop] if decoding.guard else [], streamer=streamer,
        slot_mask=plan.slot_mask if gated else None, aligner=plan.aligner if gated else None)
    return request, stop


def worker_result(plan: Plan, decoding: Decoding, outcome: GenerationOutcome,
                  stop: RepeatStop) -> GenerationResult:
    """The result of a ``worker_request`` (the worker recorded the tokens'
    log-probabilities in ``outcome``)."""
    return _result(plan.model, outcome, stop, decoding.max_new_tokens, outcome.logprobs or [])


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
                box["result"] = generate(self.plan, self.decoding, streamer)
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
        self.result = worker_result(self.plan, self.decoding, ticket.result(), stop)
