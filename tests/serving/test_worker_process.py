"""The generation worker in a process of its own (engine.serving.worker_process), real model, real
child process: its answers equal the in-process worker's (tokens, streamed text, stop state,
log-probabilities), a cancelled ask leaves, a child that dies fails its asks loudly and the
next ask gets a new one, and the child does not outlive a parent that is killed."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import psutil
import pytest

from engine.answer.generation.streamer import GuardedStreamer
from engine.answer.measure import TokenLogProbs
from engine.serving.request import GenerationRequest
from engine.serving.worker import GenerationWorker
from engine.serving.worker_process import GenerationProcessError, ProcessWorker
from engine.settings import Settings
from tests.serving.test_worker import QUESTIONS, eos_ids, prompt_embeds, request

ROOT = Path(__file__).resolve().parents[2]


class FirstPiece(GuardedStreamer):
    """A streamer that says when its first generated token came (an event, not a clock)."""

    def __init__(self, tokenizer) -> None:
        super().__init__(tokenizer)
        self.started = threading.Event()

    def put(self, value) -> None:
        super().put(value)
        if self.ids:
            self.started.set()


@pytest.fixture(scope="module")
def process_worker(real_backbone):
    worker = ProcessWorker(real_backbone.model, Settings(), max_batch=8)
    yield worker
    worker.close()


def with_logprobs(made):
    """A test request with the log-probs recorder last among its processors, as the asks have."""
    req, streamer, stop = made
    req.logits_processor.append(TokenLogProbs())
    return req, streamer, stop


def test_answers_from_the_process_equal_the_in_process_workers(real_backbone, process_worker):
    """Four prompts of different lengths decoded together in the child give the tokens, the
    streamed text, the loop stop's state and the log-probabilities of the in-process worker."""
    bb = real_backbone
    embeds = [prompt_embeds(bb, q) for q in QUESTIONS]
    local = GenerationWorker(bb.model, max_batch=8)
    try:
        expected = [with_logprobs(request(bb, e, 40)) for e in embeds]
        outcomes = [t.result(timeout=300) for t in [local.submit(m[0]) for m in expected]]
    finally:
        local.close()
    made = [with_logprobs(request(bb, e, 40)) for e in embeds]
    got = [t.result(timeout=300) for t in [process_worker.submit(m[0]) for m in made]]
    assert process_worker.pid is not None and process_worker.pid != os.getpid()
    for (req, streamer, stop), outcome, (ereq, estreamer, estop), eoutcome in zip(
            made, got, expected, outcomes):
        assert outcome.tokens == eoutcome.tokens and outcome.tokens
        assert outcome.stop == eoutcome.stop
        assert streamer.ids == estreamer.ids and streamer.shown == estreamer.shown
        assert (stop.fired, stop.trim) == (estop.fired, estop.trim)
        # the same tokens; the log-probabilities to float32's last digits (the two processes'
        # thread counts may order a sum differently)
        assert req.logits_processor[-1].values == pytest.approx(
            ereq.logits_processor[-1].values, abs=1e-4)
        assert len(req.logits_processor[-1].values) == len(outcome.tokens)
    assert process_worker.active == 0


def test_a_cancelled_ask_leaves_the_childs_batch(real_backbone, process_worker):
    bb = real_backbone
    streamer = FirstPiece(bb.tokenizer)
    req = GenerationRequest(inputs_embeds=prompt_embeds(bb, QUESTIONS[0]), max_new_tokens=2000,
                            eos_token_ids=frozenset(), streamer=streamer)
    ticket = process_worker.submit(req)
    assert streamer.started.wait(300)
    ticket.cancel()
    outcome = ticket.result(timeout=300)
    assert outcome.stop == "cancelled" and 0 < len(outcome.tokens) < 2000


def test_a_child_that_dies_fails_its_asks_and_the_next_ask_gets_a_new_one(real_backbone):
    bb = real_backbone
    worker = ProcessWorker(bb.model, Settings(), max_batch=2)
    try:
        streamer = FirstPiece(bb.tokenizer)
        ticket = worker.submit(GenerationRequest(
            inputs_embeds=prompt_embeds(bb, QUESTIONS[0]), max_new_tokens=2000,
            eos_token_ids=frozenset(), streamer=streamer))
        assert streamer.started.wait(300)
        first = worker.pid
        os.kill(first, signal.SIGKILL)
        with pytest.raises(GenerationProcessError, match="ended unexpectedly"):
            ticket.result(timeout=300)
        streamer.timeout = 60  # its stream was ended: reading it to the end does not wait
        assert "".join(streamer)
        req, streamer, _ = request(bb, prompt_embeds(bb, QUESTIONS[3]), 8)
        assert worker.submit(req).result(timeout=300).tokens == streamer.ids
        assert worker.pid not in (None, first)
    finally:
        worker.close()


def test_the_child_does_not_outlive_a_killed_parent(real_tokenizer):
    """A parent killed outright (no exit handlers run): its child sees the pipe close and ends."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from engine.serving.request import GenerationRequest
        from engine.serving.worker_process import ProcessWorker
        from engine.settings import Settings

        class Said:
            def put(self, ids):
                if ids.numel():
                    print(worker.pid, flush=True)
                    self.put = lambda ids: None
            def end(self):
                pass

        if __name__ == "__main__":
            worker = ProcessWorker(None, Settings(), max_batch=1)
            worker.submit(GenerationRequest(input_ids={real_tokenizer.encode("Hello")!r},
                                            max_new_tokens=100000, streamer=Said()))
            sys.stdin.read()  # until the test kills this process
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        assert child.ppid() == parent.pid
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=60)
        child.wait(timeout=120)  # psutil.TimeoutExpired: the child was left running
    finally:
        if parent.poll() is None:
            parent.kill()
