"""Measuring one answer: its metrics (``Metrics``: each stage's time, the tokens, the peak
memory), when the first new token's logits exist (TTFT), each generated token's
log-probability (the answer check's confidence reads them) and the memory a call adds at its
peak."""
from __future__ import annotations

import resource
import threading
import time
from dataclasses import dataclass

import torch
from transformers import LogitsProcessor


class FirstToken(LogitsProcessor):
    """Records when the first new token's logits exist (the end of prefill): TTFT."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, input_ids, scores):
        if self.at is None:
            self.at = time.perf_counter()
        return scores


class TokenLogProbs(LogitsProcessor):
    """Records the log-probability of each greedy token as generation chooses it: the maximum
    of the log-softmax of the scores it sees. Put last among the processors, it sees the scores
    the choice is made from, so the tokens are unchanged (it returns the scores as given). One
    sequence per call (``generate`` and a worker's row both decode one)."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def __call__(self, input_ids, scores):
        self.values.append(float(torch.log_softmax(scores[0].float(), dim=-1).max()))
        return scores


class PeakMemory:
    """Peak memory of one call: CUDA max allocated on GPU; on CPU the highest resident set size
    seen during the call minus the size at its start, sampled from /proc every 5 ms (a library
    call does not expose a per-call CPU peak; ru_maxrss only tells the process's lifetime peak)."""

    def __init__(self, device: torch.device, interval_s: float = 0.005):
        self.device = device
        self.interval_s = interval_s
        self.mb = 0.0

    @staticmethod
    def _rss_bytes() -> int:
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * resource.getpagesize()
        except OSError:  # not Linux: fall back to the lifetime peak (KiB on Linux, bytes on macOS)
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.peak = max(self.peak, self._rss_bytes())

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        else:
            self.base = self.peak = self._rss_bytes()
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            self.mb = (torch.cuda.max_memory_allocated(self.device) - self.base) / 2**20
        else:
            self._stop.set()
            self._thread.join()
            self.peak = max(self.peak, self._rss_bytes())
            self.mb = (self.peak - self.base) / 2**20


@dataclass
class Metrics:
    """TTFT (from the call to the first generated token's logits), total time, routing time,
    prefill tokens (sequence positions of the prompt, slots included), generated tokens, and peak
    memory (``engine.answer.measure.PeakMemory``)."""

    ttft_ms: float = 0.0
    total_ms: float = 0.0
    route_ms: float = 0.0
    query_vector_ms: float = 0.0  # part of route_ms: the H2MT query vector (a backbone pass)
    prefill_tokens: int = 0
    generated_tokens: int = 0
    peak_mem_mb: float = 0.0
    evidence_ms: float = 0.0  # the finish stage: clean-up, form and evidence lines
    # the passages stage: the routed sections' units scored, the quote, the passages shown
    # and the short answer
    quote_ms: float = 0.0
    # part of quote_ms: the second stage (engine.answer.passages.rerank; 0 when off) and the
    # sequence positions its one batched pass read (the measured work)
    rerank_ms: float = 0.0
    rerank_tokens: int = 0
    # the answer's stages after the plan: waiting for a place in the generation worker, the
    # prompt's forward pass, the generated tokens, and the check stage (key line to verdict);
    # None where not known (nothing generated; a served reader: no queue or prefill)
    queue_ms: float | None = None
    prefill_ms: float | None = None
    decode_ms: float | None = None
    check_ms: float = 0.0
    cpu_wait_ms: float = 0.0  # waiting for a place among the CPU stages (engine.serving.cpu_slots)
