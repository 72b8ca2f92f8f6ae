"""engine.answer.measure: the first token's time and a call's peak memory."""
from __future__ import annotations

import mmap
import time

import torch

from engine.answer.measure import FirstToken, PeakMemory


def test_first_token_keeps_the_first_call_only():
    first = FirstToken()
    scores = torch.zeros(1, 5)
    assert first(None, scores) is scores
    at = first.at
    time.sleep(0.01)
    first(None, scores)
    assert at is not None and first.at == at


def test_peak_memory_sees_what_a_call_allocates_and_frees():
    """The sampler reports a block that was freed before the call ended. The block is held until
    the sampler has looked at least once while it was there (on a loaded machine its thread may
    not run for a while: a fixed 50 ms hold missed it), at most 30 s. The block is a fresh
    anonymous mapping written through, so its pages are new to the process whatever the
    allocator kept from earlier tests (a numpy array once reused resident memory: no growth)."""
    with PeakMemory(torch.device("cpu"), interval_s=0.001) as peak:
        block = mmap.mmap(-1, 64 * 2**20)  # 64 MiB
        block.write(b"\x01" * len(block))  # every page touched, so resident
        deadline = time.monotonic() + 30
        while peak.peak - peak.base < 32 * 2**20 and time.monotonic() < deadline:
            time.sleep(0.005)
        block.close()
    assert peak.mb > 32  # the sampled peak, though the memory is gone at the end
    with PeakMemory(torch.device("cpu")) as idle:
        pass
    assert idle.mb < 32
