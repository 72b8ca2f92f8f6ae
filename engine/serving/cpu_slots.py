"""A bounded, fair pool of places for the asks' CPU stages (routing, the passages and the plan,
finishing and checking the answer): at most ``size`` run at once, given in the order they were
asked for, so that a burst of asks queues here instead of taking the cores from the generation
worker's decoding. Hand-written: ``threading.Semaphore`` does not promise first come, first
served, and an ask that waits behind later ones is the unfairness this is for."""
from __future__ import annotations

import os
import threading
import time
from collections import deque
from contextlib import contextmanager
from typing import Iterator


def default_size(cores: int | None = None) -> int:
    """One place per core but one (left to decoding), at least one."""
    return max(1, (cores or os.cpu_count() or 1) - 1)


class CpuSlots:
    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"CpuSlots needs at least one place, got {size}")
        self.size = size
        self._lock = threading.Lock()
        self._waiting: deque[threading.Event] = deque()
        self._busy = 0

    @contextmanager
    def held(self) -> Iterator[float]:
        """Hold a place for the block; yields the seconds waited for it. A place freed goes
        to the longest waiting caller."""
        t0 = time.perf_counter()
        turn = threading.Event()
        with self._lock:
            if self._busy < self.size and not self._waiting:
                self._busy += 1
                turn.set()
            else:
                self._waiting.append(turn)
        turn.wait()
        try:
            yield time.perf_counter() - t0
        finally:
            with self._lock:
                if self._waiting:  # the place passes on: ``_busy`` stays
                    self._waiting.popleft().set()
                else:
                    self._busy -= 1

    @property
    def busy(self) -> int:
        with self._lock:
            return self._busy

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)
