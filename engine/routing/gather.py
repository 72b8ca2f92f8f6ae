"""Gathering the calls that arrive together into one batch (the question encoders).

``Gatherer(run)``: callers hand it one item each; the first caller of a round waits
``window_s`` (a few milliseconds) for others, then runs ``run`` once per group of the items
gathered (items with equal ``key``, one group by default; equal items are computed once) and
hands every caller its own result; callers that arrive meanwhile start the next round, which
runs beside it. An error of ``run`` is raised in every caller of that group.

Batched is not bit for bit alone: a question encoded in a batch differs from the same question
alone in the last digits (the matrix kernels change with the batch's shape even without
padding; measured in docs/results.md, section "Routing cost"),
as the project's batched ``query_vectors`` already does against ``query_vector``; a route can
only change on a tie that close. Written here because no library in use does this for
in-process calls (batching servers such as TorchServe do it behind HTTP).
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Generic, Hashable, TypeVar

T = TypeVar("T", bound=Hashable)
R = TypeVar("R")

WINDOW_S = 0.004  # how long a round waits for more callers


class _Round:
    def __init__(self) -> None:
        self.items: list = []
        self.results: dict = {}
        self.errors: dict = {}
        self.done = threading.Event()


class Gatherer(Generic[T, R]):
    """Runs ``run(items) -> results`` (in order) for the items of callers that meet."""

    def __init__(self, run: Callable[[list[T]], list[R]],
                 key: Callable[[T], Hashable] = lambda item: None,
                 window_s: float = WINDOW_S, max_items: int = 32) -> None:
        self.run, self.key, self.window_s, self.max_items = run, key, window_s, max_items
        self._lock = threading.Lock()
        self._open: _Round | None = None  # the round still taking items
        self.rounds = 0  # rounds run (read by tests)

    def __call__(self, item: T) -> R:
        with self._lock:
            rnd, lead = self._open, False
            if rnd is None or len(rnd.items) >= self.max_items:
                rnd, lead = _Round(), True
                self._open = rnd
            rnd.items.append(item)
        if lead:
            time.sleep(self.window_s)
            with self._lock:
                if self._open is rnd:
                    self._open = None
            self._compute(rnd)
        rnd.done.wait()
        if item in rnd.errors:
            raise rnd.errors[item]
        return rnd.results[item]

    def _compute(self, rnd: _Round) -> None:
        try:
            groups: dict[Hashable, list[T]] = {}
            for item in dict.fromkeys(rnd.items):  # equal items once, first-come order
                groups.setdefault(self.key(item), []).append(item)
            for items in groups.values():
                try:
                    rnd.results.update(zip(items, self.run(items)))
                except Exception as e:  # every caller of the group gets it
                    rnd.errors.update((item, e) for item in items)
        finally:
            self.rounds += 1
            rnd.done.set()
