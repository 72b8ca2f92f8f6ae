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

Both rules are kept incrementally: each new token adds the one n-gram it ends to a count of
n-grams (``NGramCounts``), so a step costs the same at the hundredth token as at the first. The
generation worker hands ``RepeatStop.add`` the chosen token as a number (no tensor of the tokens
so far); ``model.generate`` calls it as a ``StoppingCriteria`` with every token so far, of which
it reads the new ones only.
"""
from __future__ import annotations

from collections import Counter, deque

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
        self._seen: list[tuple[NGramCounts, NGramCounts]] = []  # per sequence: loop, repeat
        self._fed = 0  # generated tokens of each sequence already counted (``__call__``)

    def add(self, token: int, row: int = 0) -> bool:
        """Count sequence ``row``'s newest generated token; whether a rule fired on it."""
        while len(self._seen) <= row:
            self._seen.append((NGramCounts(self.loop_n), NGramCounts(self.n)))
        loop, repeat = self._seen[row]
        looped, repeated = loop.add(token), repeat.add(token)
        if looped >= 2:
            self.fired, self.trim = "loop", self.loop_n
            return True
        if repeated >= self.times:
            self.fired = "repeat"
            return True
        return False

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        if self.start is None:  # first call: one new token has been appended
            self.start = input_ids.shape[1] - 1
        new = input_ids[:, self.start + self._fed:].tolist()  # tokens since the last call
        self._fed += len(new[0])
        done = [any([self.add(t, b) for t in tokens]) for b, tokens in enumerate(new)]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class NGramCounts:
    """How often each n-gram of a growing token sequence occurred; ``add`` counts the n-gram a
    new token ends and says how often it has occurred (``repeats`` of the sequence so far)."""

    def __init__(self, n: int) -> None:
        self.newest: deque[int] = deque(maxlen=n)
        self.counts: Counter[tuple[int, ...]] = Counter()

    def add(self, token: int) -> int:
        self.newest.append(token)
        if len(self.newest) < self.newest.maxlen:
            return 0
        gram = tuple(self.newest)
        self.counts[gram] += 1
        return self.counts[gram]


def repeats(tokens: list, n: int = REPEAT_N) -> int:
    """How often the last n items of ``tokens`` occur in ``tokens`` (0 when shorter than n)."""
    if len(tokens) < n:
        return 0
    tail = tokens[-n:]
    return sum(1 for i in range(len(tokens) - n + 1) if tokens[i:i + n] == tail)
