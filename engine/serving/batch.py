"""The sequences being decoded together: one left-padded KV cache, one step for all of them.

Each sequence is prefilled alone (its prompt, and for memory mode its slots and gate loops,
exactly as an unbatched ``generate`` computes them) and then joins the batch: its cache rows are
left-padded to the batch's length (or the batch's to its own), with an attention mask that is 0
at the padding and position ids that count its own tokens only. A decoding step feeds every
sequence's newest token at once. In float32 on the CPU the batched steps give the unbatched
tokens exactly (tests/serving/test_worker.py). A sequence that ends leaves: its rows are
dropped and the padding every remaining row shares is cut off.

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

from engine.serving.growing_cache import growing
from engine.serving.request import GenerationOutcome, Ticket


@dataclass(eq=False)
class Row:
    """One sequence's decoding state: its generated tokens (the newest not yet in the cache)
    and its stop rules (those of its request)."""

    ticket: Ticket
    cached: int  # positions of this sequence in the cache (prompt + generated - 1)
    started: float  # time.monotonic() at its prefill: the time limit counts from here
    first_token_at: float | None = None
    loops: torch.Tensor | None = None
    tokens: list[int] = field(default_factory=list)
    prefill_started_at: float | None = None  # time.perf_counter()

    def choose(self, logits: torch.Tensor) -> int:
        """The greedy token from this sequence's next-token logits [V] (float32) after its
        logits processors, which see its generated tokens only."""
        req = self.ticket.request
        scores = logits.unsqueeze(0)
        if len(req.logits_processor):
            ids = torch.tensor([self.tokens], dtype=torch.long, device=logits.device)
            scores = req.logits_processor(ids, scores)
        return int(torch.argmax(scores, dim=-1)[0])

    def push(self, token: int, scores: torch.Tensor) -> str | None:
        """Append ``token``, stream it, and say why the sequence ends (None: it goes on). Every
        stopping criterion runs at every step, as in ``generate`` (they may keep state)."""
        req = self.ticket.request
        self.tokens.append(token)
        if req.streamer is not None:
            req.streamer.put(torch.tensor([token]))
        stop = None
        if len(req.stopping_criteria):
            ids = torch.tensor([self.tokens], dtype=torch.long)
            if bool(req.stopping_criteria(ids, scores.unsqueeze(0)).any()):
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
        return GenerationOutcome(tokens=list(self.tokens),
                                 prefill_tokens=self.ticket.request.prompt_length,
                                 first_token_at=self.first_token_at, stop=stop, loops=self.loops,
                                 prefill_started_at=self.prefill_started_at)


def _left_pad(t: torch.Tensor, n: int) -> torch.Tensor:
    """[B, H, L, D] -> [B, H, n + L, D], zeros in front."""
    return F.pad(t, (0, 0, n, 0)) if n else t


class DecodeBatch:
    """Rows decoded together over one left-padded ``DynamicCache`` ([B, H, L, D] per layer)."""

    def __init__(self, row: Row, cache: DynamicCache) -> None:
        self.rows = [row]
        self.cache = growing(cache)  # each step writes in place (engine.serving.growing_cache)
        self.mask = torch.ones(1, row.cached, dtype=torch.long, device=self._device)

    @property
    def _device(self) -> torch.device:
        return self.cache.layers[0].keys.device

    @property
    def length(self) -> int:
        return self.cache.layers[0].keys.shape[-2]

    def __len__(self) -> int:
        return len(self.rows)

    def join(self, row: Row, cache: DynamicCache) -> None:
        """Add a prefilled sequence (its own one-row cache) to the batch."""
        grow = max(0, row.cached - self.length)  # the batch's new padding in front
        pad = self.length + grow - row.cached  # the newcomer's
        for mine, theirs in zip(self.cache.layers, cache.layers):
            mine.keys = torch.cat([_left_pad(mine.keys, grow), _left_pad(theirs.keys, pad)])
            mine.values = torch.cat([_left_pad(mine.values, grow), _left_pad(theirs.values, pad)])
        new_mask = torch.zeros(1, pad + row.cached, dtype=torch.long, device=self._device)
        new_mask[:, pad:] = 1
        self.mask = torch.cat([F.pad(self.mask, (grow, 0)), new_mask])
        self.rows.append(row)

    def keep(self, keep: list[int]) -> None:
        """Keep the rows at these indices (in order) and cut the left padding they all share."""
        if len(keep) == len(self.rows):
            return
        index = torch.tensor(keep, dtype=torch.long, device=self._device)
        self.rows = [self.rows[i] for i in keep]
        self.mask = self.mask[index]
        cut = int((self.mask.cumsum(1) == 0).sum(1).min()) if keep else 0
        self.mask = self.mask[:, cut:]
        for layer in self.cache.layers:
            layer.keys = layer.keys[index, :, cut:]
            layer.values = layer.values[index, :, cut:]

    @torch.no_grad()
    def step(self, model) -> torch.Tensor:
        """One decoding step: every row's newest token in, next-token logits out ([B, V],
        float32, as ``generate`` reads them)."""
        dev = self._device
        ids = torch.tensor([[r.tokens[-1]] for r in self.rows], dtype=torch.long, device=dev)
        pos = torch.tensor([[r.cached] for r in self.rows], dtype=torch.long, device=dev)
        self.mask = torch.cat([self.mask, torch.ones(len(self.rows), 1, dtype=torch.long,
                                                     device=dev)], dim=1)
        out = model(input_ids=ids, attention_mask=self.mask, position_ids=pos,
                    past_key_values=self.cache, use_cache=True, logits_to_keep=1)
        for r in self.rows:
            r.cached += 1
        return out.logits[:, -1].to(dtype=torch.float32)
