"""engine.serving.cpu_slots: at most ``size`` holders at once, and places given first come,
first served."""
from __future__ import annotations

import threading

import pytest

from engine.serving.cpu_slots import CpuSlots, default_size


def test_default_size_leaves_a_core_to_decoding():
    assert default_size(1) == 1 and default_size(2) == 1 and default_size(16) == 15


def test_a_pool_of_none_is_refused():
    with pytest.raises(ValueError, match="at least one"):
        CpuSlots(0)


def _queue(slots: CpuSlots, n: int, holder) -> list[threading.Thread]:
    """Start ``n`` holders, each once the one before it waits in the queue."""
    threads = []
    for i in range(n):
        t = threading.Thread(target=holder, args=(f"late{i}",))
        t.start()
        threads.append(t)
        while slots.waiting < i + 1:  # the queue's own count: no sleep stands for an event
            threading.Event().wait(0.001)
    return threads


def test_places_are_given_in_the_order_asked():
    slots, order, release = CpuSlots(1), [], threading.Event()
    held = threading.Event()

    def first() -> None:
        with slots.held():
            held.set()
            release.wait()

    def holder(name: str) -> None:
        with slots.held():  # one place: each enters alone, after the one before has left
            order.append(name)

    t0 = threading.Thread(target=first)
    t0.start()
    held.wait()
    late = _queue(slots, 4, holder)
    assert slots.busy == 1 and slots.waiting == 4 and order == []
    release.set()
    for t in [t0, *late]:
        t.join()
    assert order == ["late0", "late1", "late2", "late3"]
    assert slots.busy == 0 and slots.waiting == 0


def test_at_most_size_hold_a_place_at_once():
    slots, lock, running, most = CpuSlots(2), threading.Lock(), [0], [0]
    release, both = threading.Event(), threading.Barrier(3)

    def holder(name: str, first: bool = False) -> None:
        with slots.held() as waited:
            assert waited >= 0
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            if first:
                both.wait()
                release.wait()
            with lock:
                running[0] -= 1

    early = [threading.Thread(target=holder, args=(f"early{i}", True)) for i in range(2)]
    for t in early:
        t.start()
    both.wait()
    late = _queue(slots, 4, holder)
    assert slots.busy == 2 and slots.waiting == 4
    release.set()
    for t in [*early, *late]:
        t.join()
    assert most[0] == 2 and slots.busy == 0
