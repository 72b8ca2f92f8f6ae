"""One ask's generation as the worker sees it (plain data), its outcome, and its ticket.

A request is what ``model.generate`` is given for one prompt under greedy decoding: the prompt
(input embeddings, or token ids), its own logits processors and stopping criteria (each sees
the generated tokens only, as ``generate`` does when it starts from ``inputs_embeds``), at most
``max_new_tokens`` new tokens, a wall-clock limit and a streamer fed the new tokens; with
``logprobs`` the worker records each chosen token's log-probability (the maximum of the
log-softmax of the scores it was chosen from, after the processors: what
``engine.answer.measure.TokenLogProbs`` records, computed for the whole batch at once).
Memory-mode prompts add their slot mask and the ArcAligner that refines the slots during the
prefill.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import torch
from transformers import LogitsProcessorList, StoppingCriteriaList

# Why a sequence ended: the end-of-sequence token, the token limit, the time limit, one of its
# stopping criteria (e.g. the loop stop), or its client went away.
STOPS = ("eos", "length", "time", "criteria", "cancelled")


@dataclass(eq=False)
class GenerationRequest:
    """One prompt to decode greedily. Exactly one of ``inputs_embeds`` ([n, d]) and
    ``input_ids`` (n ids) is given; ``slot_mask`` (bool [n]) with ``aligner`` arms memory slots
    for the prefill (engine.memory.aligner)."""

    inputs_embeds: torch.Tensor | None = None
    input_ids: list[int] | None = None
    max_new_tokens: int = 128
    max_time: float | None = None  # seconds from the start of its prefill
    eos_token_ids: frozenset[int] = frozenset()
    logits_processor: LogitsProcessorList = field(default_factory=LogitsProcessorList)
    stopping_criteria: StoppingCriteriaList = field(default_factory=StoppingCriteriaList)
    streamer: object | None = None  # transformers' streamer interface: put(ids), end()
    logprobs: bool = False  # record each chosen token's log-probability (the outcome's)
    slot_mask: torch.Tensor | None = None
    aligner: object | None = None

    def __post_init__(self) -> None:
        self.logits_processor = LogitsProcessorList(self.logits_processor)
        self.stopping_criteria = StoppingCriteriaList(self.stopping_criteria)
        if (self.inputs_embeds is None) == (self.input_ids is None):
            raise ValueError("give the prompt as inputs_embeds or as input_ids, not both or none")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, not {self.max_new_tokens}")

    @property
    def prompt_length(self) -> int:
        return len(self.input_ids) if self.inputs_embeds is None else self.inputs_embeds.shape[0]


@dataclass
class GenerationOutcome:
    """The generated token ids (the stopping token included, as ``generate`` returns them)."""

    tokens: list[int]
    prefill_tokens: int
    first_token_at: float | None  # time.perf_counter() when the first token's logits existed
    stop: str  # STOPS
    loops: torch.Tensor | None = None  # [n_slots, n_gated_layers] when the gate ran
    prefill_started_at: float | None = None  # time.perf_counter() when its prefill began
    logprobs: list[float] | None = None  # per token, when the request asked for them


class Ticket:
    """A submitted request: wait for its ``result()``, or ``cancel()`` it (its client went
    away); a cancelled request leaves the batch before the worker's next step."""

    def __init__(self, request: GenerationRequest, wake) -> None:
        self.request = request
        self._wake = wake
        self._done = threading.Event()
        self._cancelled = threading.Event()
        self._outcome: GenerationOutcome | None = None
        self._error: BaseException | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def cancel(self) -> None:
        self._cancelled.set()
        self._wake()

    def finish(self, outcome: GenerationOutcome) -> None:
        self._outcome = outcome
        self._done.set()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self._done.set()

    def result(self, timeout: float | None = None) -> GenerationOutcome:
        """The outcome (blocks); re-raises an error of its generation in the caller's thread."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"generation not finished within {timeout} s")
        if self._error is not None:
            raise self._error
        return self._outcome


@dataclass
class GenerationResult:
    """What one answer's generation gave, whichever reader generated it, and why it ended."""

    text: str
    prefill_tokens: int
    generated_tokens: int
    first_token_at: float | None
    loops: torch.Tensor | None = None  # [n_slots, n_gated_layers] when the gate ran
    stop: str = "eos"  # why generation ended: eos | length | time | loop (cut off) | repeat
    # log-probability of each generated token as chosen (greedy, engine.answer.measure's
    # TokenLogProbs); None: not known (a served reader returns none)
    logprobs: list[float] | None = None
    # time.perf_counter() when its prefill began (before it: the wait for a place in the
    # worker); None: not known (a served reader)
    prefill_started_at: float | None = None

    @property
    def cut(self) -> bool:
        """Stopped by the token or time limit, not by the model (nor by the repetition stop)."""
        return self.stop in ("length", "time")
