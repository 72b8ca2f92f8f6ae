"""The generation worker against the unbatched path (engine.answer.generation.decoding.generate): greedy
tokens, stop reasons and gate loops identical for asks decoded together, joining and leaving
between steps; cancellation; the time limit."""
from __future__ import annotations

import threading
import time

import pytest
import torch

from engine.answer.generation.streamer import GuardedStreamer
from engine.serving.stops import RepeatStop
from engine.answer.generation.decoding import Decoding, Plan, generate
from engine.answer.generation.prompts import SYSTEM_PROMPT, chat_parts
from engine.serving.request import GenerationRequest
from engine.serving.worker import GenerationWorker
from tests.support.aligner import looping_aligner

QUESTIONS = [  # different lengths
    "How do I patch a command?",
    "What does \\ifdef do in etoolbox, and when should I use it instead of \\ifdefined? Explain "
    "the difference with an example of each.",
    "List the options of the beamer document class.",
    "Why?",
]


def prompt_embeds(backbone, question: str) -> torch.Tensor:
    (text,) = chat_parts(backbone, question, SYSTEM_PROMPT)
    return backbone.embed(torch.tensor(backbone.encode(text))).float()


def eos_ids(backbone) -> frozenset[int]:
    ids = backbone.model.generation_config.eos_token_id
    return frozenset([ids] if isinstance(ids, int) else list(ids or []))


def request(backbone, embeds, max_new, *, guard=True, slot_mask=None, aligner=None,
            max_time=None):
    """What the unbatched ``generate`` hands ``model.generate``, as a worker request."""
    streamer = GuardedStreamer(backbone.tokenizer)
    stop = RepeatStop()
    streamer.guard = stop if guard else None
    return GenerationRequest(inputs_embeds=embeds, max_new_tokens=max_new, max_time=max_time,
                             eos_token_ids=eos_ids(backbone),
                             stopping_criteria=[stop] if guard else [], streamer=streamer,
                             slot_mask=slot_mask, aligner=aligner), streamer, stop


def unbatched(backbone, embeds, max_new, slot_mask=None, aligner=None, guard=True):
    streamer = GuardedStreamer(backbone.tokenizer)
    result = generate(Plan(backbone, [embeds], slot_mask, aligner),
                      Decoding(max_new_tokens=max_new, guard=guard), streamer)
    return streamer.ids, result


def reason(outcome, stop: RepeatStop) -> str:
    """The worker's stop in the words of GenerationResult.stop."""
    return stop.fired if outcome.stop == "criteria" else outcome.stop


def test_real_model_answers_decoded_together_equal_the_unbatched_ones(real_backbone):
    """Four questions of different lengths, float32 on the CPU: two start together, two join
    while they decode; every answer's tokens and stop reason are those of ``generate``."""
    bb = real_backbone
    max_new = 32
    embeds = [prompt_embeds(bb, q) for q in QUESTIONS]
    expected = [unbatched(bb, e, max_new) for e in embeds]
    worker = GenerationWorker(bb.model, max_batch=8)
    try:
        made = [request(bb, e, max_new) for e in embeds]
        tickets = [worker.submit(made[0][0]), worker.submit(made[1][0])]
        deadline = time.monotonic() + 120
        while len(made[0][1].ids) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)  # the first two are decoding: the next two join a running batch
        assert worker.active >= 1
        tickets += [worker.submit(made[2][0]), worker.submit(made[3][0])]
        outcomes = [t.result(timeout=300) for t in tickets]
    finally:
        worker.close()
    for (ids, result), outcome, (_, streamer, stop) in zip(expected, outcomes, made):
        assert outcome.tokens == ids
        assert streamer.ids == ids
        assert reason(outcome, stop) == result.stop
        assert outcome.prefill_tokens == result.prefill_tokens
    assert len({len(o.tokens) for o in outcomes}) > 1  # they left at different steps


@pytest.fixture(scope="module")
def tiny(tiny_backbone):
    """The shared tiny backbone decoding to the limit (no end-of-sequence id) for this module's
    tests; the id is given back after them, as the other modules' tests read it."""
    config = tiny_backbone.model.generation_config
    eos = config.eos_token_id
    config.eos_token_id = None
    yield tiny_backbone
    config.eos_token_id = eos


def test_loop_stop_and_memory_slots_in_one_batch(tiny):
    """A random tiny model loops: the loop stop ends it where ``generate`` does. A memory-mode
    prompt (slots, LoRA, gate loops that fire) prefilled alone and then decoded beside text
    prompts gives ``generate``'s tokens and loop counts; so does a prompt too long to share
    their batch."""
    torch.manual_seed(5)
    aligner = looping_aligner(tiny.model, max_loops=3, lora_std=0.5)
    d = tiny.hidden_size
    texts = [prompt_embeds(tiny, q) for q in QUESTIONS]
    slots = torch.randn(3, d)
    memory = torch.cat([texts[0][:5], slots, texts[0][5:]])
    slot_mask = torch.zeros(len(memory), dtype=torch.bool)
    slot_mask[5:8] = True
    long = torch.cat([texts[1]] * 3)  # over twice as long: decoded in a batch of its own
    cases = [(e, {}) for e in [*texts, long]] + [(memory, dict(slot_mask=slot_mask,
                                                               aligner=aligner))]
    expected = [unbatched(tiny, e, 60, **kw) for e, kw in cases]
    assert expected[-1][1].loops is not None and expected[-1][1].loops.sum() > 0
    worker = GenerationWorker(tiny.model, max_batch=8)
    try:
        made = [request(tiny, e, 60, **kw) for e, kw in cases]
        outcomes = [t.result(timeout=120) for t in [worker.submit(m[0]) for m in made]]
    finally:
        worker.close()
    for (ids, result), outcome, (_, streamer, stop) in zip(expected, outcomes, made):
        assert outcome.tokens == ids
        assert reason(outcome, stop) == result.stop
        assert streamer.shown == result.text or streamer.shown.strip() == result.text
    assert {r.stop for _, r in expected} & {"loop", "repeat"}  # the loop stop was exercised
    assert torch.equal(outcomes[-1].loops, expected[-1][1].loops)


def test_a_cancelled_ask_leaves_and_the_others_go_on(tiny):
    embeds = [prompt_embeds(tiny, q) for q in QUESTIONS[:2]]
    expected, _ = unbatched(tiny, embeds[1], 50, guard=False)
    worker = GenerationWorker(tiny.model, max_batch=4)
    try:
        long_req, long_streamer, _ = request(tiny, embeds[0], 4000, guard=False)
        other_req, _, _ = request(tiny, embeds[1], 50, guard=False)
        long_t = worker.submit(long_req)
        other_t = worker.submit(other_req)
        texts = []
        reader = threading.Thread(target=lambda: texts.extend(long_streamer))  # ends at end()
        reader.start()
        while len(long_streamer.ids) < 5:
            time.sleep(0.005)
        long_t.cancel()
        out = long_t.result(timeout=60)
        reader.join(timeout=60)
        assert out.stop == "cancelled" and 5 <= len(out.tokens) < 4000
        assert not reader.is_alive()  # the stream was closed
        assert other_t.result(timeout=60).tokens == expected
        deadline = time.monotonic() + 10
        while worker.active and time.monotonic() < deadline:
            time.sleep(0.01)
        assert worker.active == 0
    finally:
        worker.close()


def test_time_limit_and_a_failing_request(tiny):
    worker = GenerationWorker(tiny.model, max_batch=4)
    try:
        req, _, _ = request(tiny, prompt_embeds(tiny, "Why?"), 100, guard=False, max_time=0.0)
        out = worker.generate(req)
        assert out.stop == "time" and len(out.tokens) == 1
        bad = GenerationRequest(inputs_embeds=torch.zeros(4, tiny.hidden_size + 1))
        with pytest.raises(RuntimeError):
            worker.generate(bad)  # its own error, in its own thread
        good, _, _ = request(tiny, prompt_embeds(tiny, "Why?"), 5, guard=False)
        assert len(worker.generate(good).tokens) == 5  # the worker lives on
    finally:
        worker.close()
    with pytest.raises(ValueError):
        GenerationRequest(max_new_tokens=3)


def test_a_failed_step_fails_its_rows_and_the_next_ask_is_answered(tiny, monkeypatch):
    """Issue 44: an error injected into a decoding step fails the rows of that step only, ends
    their streams (their readers stop waiting), and the worker answers the next ask."""
    from engine.serving import batch as batch_module

    worker = GenerationWorker(tiny.model, max_batch=4)
    real_step = batch_module.DecodeBatch.step
    failures = []

    def failing_step(self, model):
        if not failures:
            failures.append(len(self.rows))
            raise RuntimeError("injected step failure")
        return real_step(self, model)

    monkeypatch.setattr(batch_module.DecodeBatch, "step", failing_step)
    try:
        req, streamer, _ = request(tiny, prompt_embeds(tiny, "Why?"), 20, guard=False)
        ticket = worker.submit(req)
        texts = []
        reader = threading.Thread(target=lambda: texts.extend(streamer))
        reader.start()
        with pytest.raises(RuntimeError, match="injected step failure"):
            ticket.result(timeout=60)
        reader.join(timeout=60)
        assert not reader.is_alive() and failures == [1]  # its stream ended
        good, _, _ = request(tiny, prompt_embeds(tiny, "Why?"), 5, guard=False)
        assert len(worker.generate(good).tokens) == 5
    finally:
        worker.close()


def test_a_dead_loop_is_replaced_and_every_stream_ends(tiny, monkeypatch):
    """An error outside any one request (here: in taking the waiting requests) ends the loop:
    its running rows fail with their streams ended, and the next submit starts a new loop that
    answers."""
    worker = GenerationWorker(tiny.model, max_batch=4)
    try:
        long_req, long_streamer, _ = request(tiny, prompt_embeds(tiny, "Why?"), 4000,
                                             guard=False)
        long_t = worker.submit(long_req)
        reader = threading.Thread(target=lambda: list(long_streamer))  # ends at end()
        reader.start()
        while len(long_streamer.ids) < 3:
            time.sleep(0.005)
        first = worker._thread
        real_take = GenerationWorker._take

        def broken_take(self, room, block):
            monkeypatch.setattr(GenerationWorker, "_take", real_take)  # fails once
            raise RuntimeError("injected loop failure")

        monkeypatch.setattr(GenerationWorker, "_take", broken_take)
        with pytest.raises(RuntimeError, match="injected loop failure"):
            long_t.result(timeout=60)
        reader.join(timeout=60)
        assert not reader.is_alive()  # its stream ended
        first.join(timeout=10)
        assert not first.is_alive()
        good, _, _ = request(tiny, prompt_embeds(tiny, "Why?"), 5, guard=False)
        assert len(worker.generate(good).tokens) == 5
        assert worker._thread is not first
    finally:
        worker.close()


def test_a_long_prefill_does_not_freeze_the_running_streams(tiny, monkeypatch):
    """Issue 44: prefills run beside the loop, so the running sequences keep getting tokens
    while a long prompt is prefilled (here a prefill held for a second)."""
    real_prefill = GenerationWorker._prefill
    held = threading.Event()

    def slow_prefill(self, ticket):
        if ticket.request.prompt_length > 100:
            held.set()
            time.sleep(1.0)
        return real_prefill(self, ticket)

    monkeypatch.setattr(GenerationWorker, "_prefill", slow_prefill)
    worker = GenerationWorker(tiny.model, max_batch=4)
    try:
        short_req, short_streamer, _ = request(tiny, prompt_embeds(tiny, "Why?"), 4000,
                                               guard=False)
        short_t = worker.submit(short_req)
        while len(short_streamer.ids) < 3:
            time.sleep(0.005)
        long_embeds = prompt_embeds(tiny, " ".join(QUESTIONS * 4))
        assert long_embeds.shape[0] > 100
        long_req, _, _ = request(tiny, long_embeds, 5, guard=False)
        long_t = worker.submit(long_req)
        held.wait(10)
        before = len(short_streamer.ids)
        time.sleep(0.5)  # the long prefill is still held
        assert len(short_streamer.ids) > before + 3, "the running stream went on"
        assert len(long_t.result(timeout=60).tokens) == 5
        short_t.cancel()
        assert short_t.result(timeout=60).stop == "cancelled"
    finally:
        worker.close()


# Eight asks as the product makes them (``worker_request``): different lengths, limits, loop
# stop on or off, penalties, an n-gram ban, a copy constraint.
PRODUCT_ASKS = [
    ("How do I patch a command?", dict(max_new_tokens=24)),
    ("Repeat after me, forever: la la la la la la la la la la la la", dict(max_new_tokens=40)),
    ("Answer yes or no only: is LaTeX a typesetting system?", dict(max_new_tokens=24)),
    ("List the options of the beamer document class.", dict(max_new_tokens=24,
                                                            repetition_penalty=1.3)),
    ("What does \\ifdef do in etoolbox, and when should I use it instead of \\ifdefined?",
     dict(max_new_tokens=24, no_repeat_ngram=3)),
    ("Why?", dict(max_new_tokens=6)),
    ("How do I make a table?", dict(max_new_tokens=16, guard=False)),
    ("What does the red light mean?", dict(max_new_tokens=20, copy_from=(
        "The red light means the supply is low. The green light means the unit is ready."))),
]


def product_results(bb, asks, worker):
    """The asks' results through ``worker`` (submitted at once), as ``Streamed`` makes them;
    every other ask also records its log-probabilities row by row, as a processor
    (``TokenLogProbs``, last), beside the batch's (None for the others)."""
    from engine.answer.generation.decoding import Decoding, Plan, worker_request, worker_result
    from engine.answer.measure import TokenLogProbs

    made = []
    for i, (question, kw) in enumerate(asks):
        plan, decoding = Plan(bb, [prompt_embeds(bb, question)]), Decoding(**kw)
        streamer = GuardedStreamer(bb.tokenizer)
        req, stop = worker_request(plan, decoding, streamer)
        by_row = TokenLogProbs() if i % 2 == 0 else None
        if by_row is not None:
            req.logits_processor.append(by_row)
        made.append((plan, decoding, streamer, req, stop, by_row))
    tickets = [worker.submit(m[3]) for m in made]
    results = []
    for (plan, decoding, streamer, _, stop, by_row), ticket in zip(made, tickets):
        outcome = ticket.result(timeout=300)
        results.append((worker_result(plan, decoding, outcome, stop), outcome.tokens, streamer,
                        by_row.values if by_row is not None else None))
    return results


def test_real_model_product_asks_alone_and_eight_together_equal_generate(real_backbone):
    """The batched choice (one argmax and one host read per step, processors on a row's own
    view, the incremental loop stop): one ask alone and eight at once give ``generate``'s
    tokens, text, stop reason and log-probabilities."""
    from engine.answer.generation.decoding import Decoding, Plan

    bb = real_backbone
    expected = []
    for question, kw in PRODUCT_ASKS:
        streamer = GuardedStreamer(bb.tokenizer)
        result = generate(Plan(bb, [prompt_embeds(bb, question)]), Decoding(**kw), streamer)
        expected.append((result, streamer.ids))
    worker = GenerationWorker(bb.model, max_batch=8)
    try:
        alone = product_results(bb, PRODUCT_ASKS[:1], worker)
        together = product_results(bb, PRODUCT_ASKS, worker)
    finally:
        worker.close()
    for (want, ids), (got, tokens, streamer, by_row) in zip(expected[:1] + expected,
                                                             alone + together):
        assert tokens == ids and streamer.ids == ids
        assert (got.text, got.stop, got.generated_tokens) == (want.text, want.stop,
                                                              want.generated_tokens)
        assert streamer.shown.strip() == want.text
        # the worker's forward differs from generate's in the last digits (its mask, positions)
        assert got.logprobs == pytest.approx(want.logprobs, abs=1e-4)
        if by_row is not None:  # the batch's log-softmax gives the row's own numbers exactly
            assert got.logprobs == by_row
    assert {"length", "eos"} <= {r.stop for r, _ in expected}
    assert {"loop", "repeat"} & {r.stop for r, _ in expected}
