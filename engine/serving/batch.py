"""The sequences being decoded together: one left-padded KV cache, one step for all of them.

Each sequence is prefilled alone (its prompt, and for memory mode its slots and gate loops,
exactly as an unbatched ``generate`` computes them) and then joins the batch: its cache rows are
left-padded to the batch's length (or the batch's to its own), with an attention mask that is 0
at the padding and position ids that count its own tokens only. A decoding step feeds every
sequence's newest token at once. In float32 on the CPU the batched steps give the unbatched
tokens exactly (tests/serving/test_worker.py). A sequence that ends leaves: its rows are
dropped and the padding every remaining row shares is cut off.

A step does no per-row host work beyond its rows' Python: the next step's ids, positions and
mask stay on the device; the tokens are chosen for the batch at once (``choose``: one argmax,
the log-probabilities asked for, a row's logits processors on its own [1, V] view) and read to
the host once, as numbers that the rows' stop rules, eos and limits read.

Why not transformers' own cache helpers alone: ``DynamicCache`` can select batch rows
(``batch_select_indices``) but has no way to add a sequence to a running batch or to cut
shared left padding; those two are written here on its per-layer key/value tensors.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from engine.serving.growing_cache import ROOM, growing
from engine.serving.request import GenerationOutcome, Ticket
from engine.serving.stops import RepeatStop


@dataclass
class Choice:
    """One step's greedy choice for a batch's rows (plain data): the chosen ids on the device
    ([B], the next step's input), the same as numbers, each row's log-probability (None: not
    asked for) and the error of a row whose logits processor raised (None: chosen)."""

    ids: torch.Tensor
    tokens: list[int]
    logprobs: list[float | None]
    errors: list[Exception | None]


def choose(rows: list["Row"], logits: torch.Tensor) -> Choice:
    """The greedy tokens of ``rows`` from their next-token logits [B, V] (float32), as
    ``generate`` chooses each: a row's logits processors run on its own [1, V] view (they see
    its generated tokens only); then one argmax for the batch, the log-probabilities asked for
    (``GenerationRequest.logprobs``) for the batch, and one host read of both."""
    scores = logits
    errors: list[Exception | None] = [None] * len(rows)
    processed = [i for i, r in enumerate(rows) if len(r.ticket.request.logits_processor)]
    if processed:
        scores = logits.clone()  # the stopping criteria see the logits as the model gave them
        for i in processed:
            view = scores[i:i + 1]
            try:
                out = rows[i].process(view)
            except Exception as e:  # noqa: BLE001 - this row fails, the others go on
                errors[i] = e
                continue
            if out is not view:
                view.copy_(out)
    ids = scores.argmax(dim=-1)
    if any(r.ticket.request.logprobs for r in rows):
        best = torch.log_softmax(scores, dim=-1).amax(dim=-1)
        # float64 holds every token id and every float32 exactly: one read for both
        read = torch.stack([ids.to(torch.float64), best.to(torch.float64)]).tolist()
        tokens = [int(t) for t in read[0]]
        logprobs = [lp if r.ticket.request.logprobs else None for r, lp in zip(rows, read[1])]
    else:
        tokens, logprobs = ids.tolist(), [None] * len(rows)
    for i, r in enumerate(rows):
        r.keep_id(ids[i])
    return Choice(ids, tokens, logprobs, errors)


@dataclass(eq=False)
class Row:
    """One sequence's decoding state: its generated tokens (the newest not yet in the cache),
    their log-probabilities when asked for, and its stop rules (those of its request). ``ids``
    holds the generated tokens on the device ([1, max_new_tokens], filled in place) for the
    logits processors and stopping criteria that read a tensor of them; None when none does."""

    ticket: Ticket
    cached: int  # positions of this sequence in the cache (prompt + generated - 1)
    started: float  # time.monotonic() at its prefill: the time limit counts from here
    first_token_at: float | None = None
    loops: torch.Tensor | None = None
    tokens: list[int] = field(default_factory=list)
    prefill_started_at: float | None = None  # time.perf_counter()
    logprobs: list[float] = field(default_factory=list)
    ids: torch.Tensor | None = None

    def __post_init__(self) -> None:
        req = self.ticket.request
        self._reads_ids = bool(len(req.logits_processor)) or any(
            not isinstance(c, RepeatStop) for c in req.stopping_criteria)

    def keep_id(self, token: torch.Tensor) -> None:
        """Write the newly chosen token (a 0-d tensor on the device) into ``ids``, in place."""
        if not self._reads_ids:
            return
        if self.ids is None:
            self.ids = torch.empty(1, self.ticket.request.max_new_tokens, dtype=torch.long,
                                   device=token.device)
        self.ids[0, len(self.tokens)] = token

    def _generated(self) -> torch.Tensor:
        """The generated ids so far, [1, n] (a view of ``ids``)."""
        if self.ids is None:  # nothing generated yet
            return torch.empty(1, 0, dtype=torch.long)
        return self.ids[:, :len(self.tokens)]

    def process(self, scores: torch.Tensor) -> torch.Tensor:
        """This sequence's logits processors on its scores [1, V]."""
        generated = self._generated()
        return self.ticket.request.logits_processor(generated.to(scores.device), scores)

    def push(self, token: int, scores: torch.Tensor, logprob: float | None = None) -> str | None:
        """Append ``token`` (chosen from ``scores`` [V], with ``logprob``), stream it, and say
        why the sequence ends (None: it goes on). Every stopping criterion runs at every step,
        as in ``generate`` (they may keep state); ours (``RepeatStop``) counts the new token
        only, the others read the generated ids."""
        req = self.ticket.request
        self.tokens.append(token)
        if logprob is not None:
            self.logprobs.append(logprob)
        if req.streamer is not None:
            req.streamer.put(torch.tensor([token]))
        stop = None
        fired = False
        for criterion in req.stopping_criteria:
            if isinstance(criterion, RepeatStop):
                fired = criterion.add(token) or fired
            else:
                fired = bool(criterion(self._generated(), scores.unsqueeze(0)).any()) or fired
        if fired:
            stop = "criteria"
        if stop is None and token in req.eos_token_ids:
            stop = "eos"
        if stop is None and len(self.tokens) >= req.max_new_tokens:
            stop = "length"
        if stop is None and req.max_time is not None and \
                time.monotonic() - self.started > req.max_time:
            stop = "time"
        return stop

    def outcome(self, stop: str) -> GenerationOutcome:
        req = self.ticket.request
        return GenerationOutcome(tokens=list(self.tokens), prefill_tokens=req.prompt_length,
                                 first_token_at=self.first_token_at, stop=stop, loops=self.loops,
                                 prefill_started_at=self.prefill_started_at,
                                 logprobs=list(self.logprobs) if req.logprobs else None)


def _left_pad(t: torch.Tensor, n: int) -> torch.Tensor:
    """[B, H, L, D] -> [B, H, n + L, D], zeros in front."""
    return F.pad(t, (0, 0, n, 0)) if n else t


class DecodeBatch:
    """Rows decoded together over one left-padded ``DynamicCache`` ([B, H, L, D] per layer).
    Between steps the batch keeps on the device what the next step feeds: the rows' chosen ids
    ([B, 1]), their positions ([B, 1], one added per step) and the attention mask ([B, L], in
    a buffer with ``ROOM`` spare columns, each step's column set in place), so a step builds
    nothing from the host; only a join or a leave rebuilds them."""

    def __init__(self, row: Row, cache: DynamicCache) -> None:
        self.rows = [row]
        self.cache = growing(cache)  # each step writes in place (engine.serving.growing_cache)
        dev = self._device
        self._set_mask(torch.ones(1, row.cached, dtype=torch.long, device=dev))
        self.next_ids = torch.tensor([[row.tokens[-1]]], dtype=torch.long, device=dev)
        self.positions = torch.tensor([[row.cached]], dtype=torch.long, device=dev)

    @property
    def _device(self) -> torch.device:
        return self.cache.layers[0].keys.device

    @property
    def length(self) -> int:
        return self.cache.layers[0].keys.shape[-2]

    @property
    def mask(self) -> torch.Tensor:
        """The attention mask [B, L]: 0 at each row's left padding (a view of the buffer)."""
        return self._mask[:, :self._mask_filled]

    def _set_mask(self, mask: torch.Tensor, room: int = ROOM) -> None:
        """Hold ``mask`` in a new buffer with ``room`` spare columns."""
        b, n = mask.shape
        self._mask = mask.new_zeros((b, n + room))
        self._mask[:, :n] = mask
        self._mask_filled = n

    def __len__(self) -> int:
        return len(self.rows)

    def join(self, row: Row, cache: DynamicCache) -> None:
        """Add a prefilled sequence (its own one-row cache) to the batch."""
        grow = max(0, row.cached - self.length)  # the batch's new padding in front
        pad = self.length + grow - row.cached  # the newcomer's
        for mine, theirs in zip(self.cache.layers, cache.layers):
            mine.keys = torch.cat([_left_pad(mine.keys, grow), _left_pad(theirs.keys, pad)])
            mine.values = torch.cat([_left_pad(mine.values, grow), _left_pad(theirs.values, pad)])
        dev = self._device
        new_mask = torch.zeros(1, pad + row.cached, dtype=torch.long, device=dev)
        new_mask[:, pad:] = 1
        self._set_mask(torch.cat([F.pad(self.mask, (grow, 0)), new_mask]))
        self.next_ids = torch.cat([self.next_ids, torch.tensor([[row.tokens[-1]]],
                                                               dtype=torch.long, device=dev)])
        self.positions = torch.cat([self.positions, torch.tensor([[row.cached]],
                                                                 dtype=torch.long, device=dev)])
        self.rows.append(row)

    def keep(self, keep: list[int]) -> None:
        """Keep the rows at these indices (in order) and cut the left padding they all share
        (a row's padding is the batch's length less its own positions)."""
        if len(keep) == len(self.rows):
            return
        index = torch.tensor(keep, dtype=torch.long, device=self._device)
        self.rows = [self.rows[i] for i in keep]
        cut = min(self.length - r.cached for r in self.rows) if keep else 0
        self._set_mask(self.mask[index][:, cut:])
        self.next_ids, self.positions = self.next_ids[index], self.positions[index]
        for layer in self.cache.layers:
            layer.keys = layer.keys[index, :, cut:]
            layer.values = layer.values[index, :, cut:]

    @torch.no_grad()
    def step(self, model) -> torch.Tensor:
        """One decoding step: every row's newest token in, next-token logits out ([B, V],
        float32, as ``generate`` reads them)."""
        if self._mask_filled == self._mask.shape[1]:  # the buffer is full: room for ROOM more
            self._set_mask(self.mask)
        self._mask[:, self._mask_filled] = 1
        self._mask_filled += 1
        out = model(input_ids=self.next_ids, attention_mask=self.mask,
                    position_ids=self.positions, past_key_values=self.cache, use_cache=True,
                    logits_to_keep=1)
        self.positions = self.positions + 1
        for r in self.rows:
            r.cached += 1
        return out.logits[:, -1].to(dtype=torch.float32)

    def choose(self, logits: torch.Tensor) -> Choice:
        """The rows' tokens from this step's logits (``choose``); their ids feed the next
        step."""
        choice = choose(self.rows, logits)
        self.next_ids = choice.ids.view(-1, 1)
        return choice
