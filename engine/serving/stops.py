"""The stop rules of greedy decoding, one place for every reader: the in-process decoding and
the generation worker apply ``RepeatStop`` to tokens, the served reader the same two rules to its
streamed pieces (``engine.serving.remote_decoding``).

- loop: the newest ``LOOP_N`` = 16 generated tokens already occurred among the generated tokens.
  The model has started to repeat itself; those 16 tokens are cut off (``trim``) and the answer
  ends where the repetition began. The streamer holds the newest 16 tokens back
  (``engine.answer.generation.streamer``), so a cut loop is never shown while streaming. Sixteen
  tokens is longer than a command name mentioned twice (``\\patchcmd[<prefix>]{<command>}`` is 12).
- repeat: the newest 4 tokens occur for the third time (a loop whose rounds differ, e.g. in a
  list number). Nothing is cut; ``engine.answer.generation.cleanup.degeneracy`` judges the text.
"""
from __future__ import annotations

import torch
from transformers import StoppingCriteria

LOOP_N = 16
REPEAT_N = 4
REPEAT_TIMES = 3


class RepeatStop(StoppingCriteria):
    """The two stop rules of the module docstring; ``fired`` is "loop", "repeat" or None and
    ``trim`` the number of newest tokens to drop."""

    def __init__(self, loop_n: int = LOOP_N, n: int = REPEAT_N, times: int = REPEAT_TIMES):
        self.loop_n, self.n, self.times = loop_n, n, times
        self.start: int | None = None  # prompt length (0 when generating from embeddings)
        self.fired: str | None = None
        self.trim = 0

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        if self.start is None:  # first call: one new token has been appended
            self.start = input_ids.shape[1] - 1
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for b in range(input_ids.shape[0]):
            toks = input_ids[b, self.start:].tolist()
            if repeats(toks, self.loop_n) >= 2:
                done[b], self.fired, self.trim = True, "loop", self.loop_n
            elif repeats(toks, self.n) >= self.times:
                done[b], self.fired = True, "repeat"
        return done


def repeats(tokens: list, n: int = REPEAT_N) -> int:
    """How often the last n items of ``tokens`` occur in ``tokens`` (0 when shorter than n)."""
    if len(tokens) < n:
        return 0
    tail = tokens[-n:]
    return sum(1 for i in range(len(tokens) - n + 1) if tokens[i:i + n] == tail)
