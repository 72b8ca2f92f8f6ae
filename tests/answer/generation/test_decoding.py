"""engine.answer.generation.decoding: a plan decoded whole or streamed gives the same text; limits stop it."""
from __future__ import annotations

from engine.answer.generation.reader import InProcessReader
from engine.answer.generation.decoding import Decoding, Streamed, generate, stripped
from engine.answer.generation.prompts import text_plan


def test_streamed_chunks_join_to_the_decoded_text(tiny_backbone):
    plan = text_plan(InProcessReader(tiny_backbone), "How do I power a large widget?", "Large widgets need 12 V.")
    decoding = Decoding(max_new_tokens=6, guard=False)
    whole = generate(plan, decoding)
    streamed = Streamed(plan, decoding)
    chunks = list(streamed)
    assert streamed.result is not None and "".join(chunks) == whole.text == streamed.result.text
    assert whole.prefill_tokens == sum(len(p) for p in plan.pieces)
    assert 1 <= whole.generated_tokens <= 6 and whole.first_token_at is not None
    assert whole.stop in ("eos", "length") and whole.cut == (whole.stop == "length")


def test_the_token_limit_cuts(tiny_backbone):
    plan = text_plan(InProcessReader(tiny_backbone), "Say something long.", "")
    result = generate(plan, Decoding(max_new_tokens=1, guard=False))
    assert result.generated_tokens == 1 and result.stop in ("eos", "length")


def test_stripped_chunks_lose_only_the_outer_space():
    assert list(stripped(iter(["  ", " Hello", " ", "world ", " "]))) == ["Hello", " world"]
    assert "".join(stripped(iter(["\n", "a  ", "b\n"]))) == "a  b"


def test_streamed_through_the_generation_worker_equals_generate(tiny_backbone):
    """Text plans (loop stop on) and a memory plan with gate loops, streamed through one
    generation worker at once: the chunks, text, stop reason, token counts and loop counts of
    the unbatched ``generate``."""
    import threading

    import torch

    from engine.answer.generation.decoding import Plan
    from engine.answer.generation.prompts import prompt_around_slots
    from engine.serving.worker import GenerationWorker
    from tests.support.aligner import looping_aligner

    torch.manual_seed(7)
    aligner = looping_aligner(tiny_backbone.model, max_loops=2)
    plans = [text_plan(InProcessReader(tiny_backbone), q, c) for q, c in (
        ("How do I power a large widget?", "Large widgets need 12 V."),
        ("Why?", ""), ("What does the red light mean on the panel of the controller?",
                       "Red means the supply is low. Green means ready."))]
    head, tail = prompt_around_slots(tiny_backbone, "What is in here?")
    slots = torch.randn(3, tiny_backbone.hidden_size)
    mask = torch.cat([torch.zeros(len(head), dtype=torch.bool), torch.ones(3, dtype=torch.bool),
                      torch.zeros(len(tail), dtype=torch.bool)])
    plans.append(Plan(tiny_backbone, [head, slots, tail], mask, aligner))
    decoding = Decoding(max_new_tokens=24)
    expected = [generate(p, decoding) for p in plans]
    worker = GenerationWorker(tiny_backbone.model, max_batch=8)
    streams = [Streamed(p, decoding, worker) for p in plans]
    chunks: list = [None] * len(plans)

    def read(i):
        chunks[i] = list(streams[i])

    threads = [threading.Thread(target=read, args=(i,)) for i in range(len(plans))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        worker.close()
    for want, got, parts in zip(expected, streams, chunks):
        r = got.result
        assert (r.text, r.stop, r.generated_tokens, r.prefill_tokens) == (
            want.text, want.stop, want.generated_tokens, want.prefill_tokens)
        assert "".join(parts) == want.text
    assert expected[-1].loops is not None and torch.equal(streams[-1].result.loops,
                                                          expected[-1].loops)


def test_closing_the_stream_takes_the_ask_out_of_the_batch(tiny_backbone):
    import time

    from engine.serving.worker import GenerationWorker

    plan = text_plan(InProcessReader(tiny_backbone), "Say something long.", "")
    worker = GenerationWorker(tiny_backbone.model, max_batch=2)
    try:
        stream = iter(Streamed(plan, Decoding(max_new_tokens=4000, guard=False), worker))
        next(stream)  # the answer has started
        assert worker.active == 1
        stream.close()  # the client went away
        deadline = time.monotonic() + 30
        while worker.active and time.monotonic() < deadline:
            time.sleep(0.01)
        assert worker.active == 0
    finally:
        worker.close()


def test_the_tokens_log_probabilities_are_recorded_the_same_both_ways(tiny_backbone):
    """``TokenLogProbs`` (engine.answer.measure) records each generated token's
    log-probability, one per token, by ``generate`` and by the generation worker alike (the
    answer check's confidence reads them); the tokens are the same with it."""
    import math

    from engine.serving.worker import GenerationWorker

    plan = text_plan(InProcessReader(tiny_backbone), "How do I power a large widget?",
                     "Large widgets need 12 V.")
    decoding = Decoding(max_new_tokens=6, guard=False)
    whole = generate(plan, decoding)
    assert len(whole.logprobs) == whole.generated_tokens
    assert all(lp <= 0 and math.isfinite(lp) for lp in whole.logprobs)
    worker = GenerationWorker(tiny_backbone.model, max_batch=2)
    try:
        streamed = Streamed(plan, decoding, worker)
        assert "".join(streamed) == whole.text
    finally:
        worker.close()
    assert streamed.result.generated_tokens == whole.generated_tokens
    assert all(abs(a - b) < 1e-3 for a, b in zip(streamed.result.logprobs, whole.logprobs))
