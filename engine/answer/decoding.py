"""Decoding a plan: greedy generation from input embeddings (text and memory slots), streamed.

Decoding stops on a looping 4-gram (``engine.answer.guard``); ``GenerationResult.stop`` says why
generation ended (eos, length, time, repeat)."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Iterator

import torch
from transformers import LogitsProcessorList, StoppingCriteriaList

from engine.answer.guard import DECODE, GuardedStreamer, RepeatStop
from engine.answer.measure import FirstToken
from engine.memory.backbone import Backbone


@dataclass(frozen=True)
class Plan:
    """A mode's prompt, ready to generate from: the model that generates, its input embedding
    pieces, the slot mask and the gate (``aligner``; None: no gate)."""

    model: Backbone
    pieces: list[torch.Tensor]
    slot_mask: torch.Tensor | None = None
    aligner: object | None = None


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
    first = FirstToken()
    stop = RepeatStop()
    kwargs = dict(inputs_embeds=embeds, attention_mask=mask, max_new_tokens=max_new_tokens,
                  do_sample=False, logits_processor=LogitsProcessorList([first]),
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
    new = out[0]  # with inputs_embeds only, generate returns just the new tokens
    text = backbone.tokenizer.decode(new[: len(new) - stop.trim], **DECODE).strip()
    if stop.fired:
        why = stop.fired
    elif new.numel() and int(new[-1]) in _eos_ids(backbone):
        why = "eos"
    elif new.numel() >= max_new_tokens:
        why = "length"
    else:
        why = "time"
    return GenerationResult(text=text, prefill_tokens=embeds.shape[1],
                            generated_tokens=int(new.numel()), first_token_at=first.at, loops=loops,
                            stop=why)


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
    are generated (in a worker thread; an error there is raised in the iterating thread), after
    which ``result`` holds the ``GenerationResult``."""

    def __init__(self, plan: Plan, decoding: Decoding):
        self.plan, self.decoding = plan, decoding
        self.result: GenerationResult | None = None

    def __iter__(self) -> Iterator[str]:
        streamer = GuardedStreamer(self.plan.model.tokenizer)
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
