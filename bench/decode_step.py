"""One decoding step of the bundled backbone, one sequence against eight, with transformers'
``DynamicCache`` (grows by ``torch.cat``) and with the generation worker's growing cache
(``engine.serving.growing_cache``); with ``--loop``, the generation worker's whole step and its
host share instead.

    python -m bench.decode_step [--length 800] [--steps 24] [--dtype bfloat16]
    python -m bench.decode_step --loop [--max-new 128] [--profile]

Each batch is prefilled once with random token ids of ``--length`` positions, then stepped
``--steps`` times (one new token per row, as ``engine.serving.batch.DecodeBatch.step`` feeds
them); printed: the median step in ms per batch size and cache, the ratios eight rows / one
row, and growing / dynamic. Run on a quiet machine: the figures are wall times. ``--dtype
bfloat16`` steps the backbone's weights cast to bfloat16 (the product loads float32 on a CPU)
and also times the prefill, to compare the two precisions on a CPU that computes bfloat16.

``--loop``: text answers as the product asks them (``worker_request``: the loop stop, the
log-probabilities, a streamer) to the generation worker, one alone and eight at once. First the
worker's step is driven by hand (the rows prefilled, then one batch stepped until every row
ends): per step, its wall time and the model's forward within it (forward hooks; on CUDA
synchronized), so the host share of a step is the difference, in wall time and in the loop
thread's CPU time (which a loaded machine's waits do not inflate; with one torch thread the
forward's arithmetic runs in that thread too). Then the same answers submitted
as an ask submits them: tokens a second from submit to the last outcome. ``--profile``: instead,
eight rows' driven steps under cProfile, the loop's own functions by cumulative time.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import time

import torch
from transformers import DynamicCache

from engine.memory.backbone import load_backbone
from engine.serving.growing_cache import growing
from engine.settings import Settings


@torch.no_grad()
def step_ms(model, rows: int, length: int, steps: int, grow: bool) -> float:
    """The median wall time of one decoding step, in ms."""
    ids = torch.randint(0, 1000, (rows, length))
    cache = DynamicCache(config=model.config)
    model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    if grow:
        cache = growing(cache)
    mask = torch.ones(rows, length, dtype=torch.long)
    times = []
    for s in range(steps):
        mask = torch.cat([mask, torch.ones(rows, 1, dtype=torch.long)], dim=1)
        token = torch.randint(0, 1000, (rows, 1))
        pos = torch.full((rows, 1), length + s)
        t0 = time.perf_counter()
        model(input_ids=token, attention_mask=mask, position_ids=pos, past_key_values=cache,
              use_cache=True, logits_to_keep=1)
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


@torch.no_grad()
def prefill_ms(model, rows: int, length: int, repeats: int = 3) -> float:
    """The median wall time of prefilling ``rows`` x ``length`` random positions, in ms."""
    ids, times = torch.randint(0, 1000, (rows, length)), []
    for _ in range(repeats):
        t0 = time.perf_counter()
        model(input_ids=ids, use_cache=True, logits_to_keep=1)
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


QUESTIONS = [  # about the same length: eight rows share one batch (worker.LENGTH_RATIO)
    "How do I patch a command?", "What does the ifdef macro do?", "How do I add a new page?",
    "How do I change the page margins?", "What is a document class?", "How do I cite a book?",
    "How do I make a table?", "How do I draw a figure?",
]


class ForwardClock:
    """The model's forward passes timed with hooks: ``seconds`` (wall) and ``cpu`` (this
    thread's CPU time: what a loaded machine's waits do not inflate) summed since reset."""

    def __init__(self, model) -> None:
        self.model, self.seconds, self.cpu, self._t0, self._c0 = model, 0.0, 0.0, 0.0, 0.0
        model.register_forward_pre_hook(self._before)
        model.register_forward_hook(self._after)

    def _sync(self) -> None:
        if self.model.device.type == "cuda":
            torch.cuda.synchronize()

    def _before(self, *_) -> None:
        self._sync()
        self._t0, self._c0 = time.perf_counter(), time.thread_time()

    def _after(self, *_) -> None:
        self._sync()
        self.seconds += time.perf_counter() - self._t0
        self.cpu += time.thread_time() - self._c0


def product_requests(backbone, rows: int, max_new: int) -> list:
    """``rows`` text answers' generation requests as an ask makes them, each with a streamer."""
    from engine.answer.generation.decoding import Decoding, Plan, worker_request
    from engine.answer.generation.prompts import SYSTEM_PROMPT, chat_parts
    from engine.answer.generation.streamer import GuardedStreamer

    made = []
    for q in QUESTIONS[:rows]:
        (text,) = chat_parts(backbone, q, SYSTEM_PROMPT)
        embeds = backbone.embed(torch.tensor(backbone.encode(text)))
        plan = Plan(backbone, [embeds])
        made.append(worker_request(plan, Decoding(max_new_tokens=max_new),
                                   GuardedStreamer(backbone.tokenizer))[0])
    return made


@torch.no_grad()
def driven_steps(backbone, clock: ForwardClock, rows: int, max_new: int) -> dict:
    """The worker's steps of one batch of ``rows`` answers, driven by hand: per-step wall and
    forward medians (ms), the host share's median in wall and in CPU time (ms), tokens,
    decoding tokens a second."""
    from engine.serving.request import Ticket
    from engine.serving.worker import GenerationWorker

    worker = GenerationWorker(backbone.model, max_batch=8)
    tickets = [Ticket(r, lambda: None) for r in product_requests(backbone, rows, max_new)]
    batches = []
    for t in tickets:
        worker._admit(worker._prefilled(t), batches)
    walls, forwards, host_cpu = [], [], []
    start = time.perf_counter()
    while batches:
        clock.seconds = clock.cpu = 0.0
        t0, c0 = time.perf_counter(), time.thread_time()
        batches = [b for b in batches if worker._step(b)]
        walls.append(time.perf_counter() - t0)
        forwards.append(clock.seconds)
        host_cpu.append(time.thread_time() - c0 - clock.cpu)
    wall = time.perf_counter() - start
    worker.close()
    tokens = sum(len(t.result().tokens) for t in tickets)
    hosts = [w - f for w, f in zip(walls, forwards)]
    return dict(step=1000 * statistics.median(walls), forward=1000 * statistics.median(forwards),
                host=1000 * statistics.median(hosts), steps=len(walls), tokens=tokens,
                host_cpu=1000 * statistics.median(host_cpu),
                tps=(tokens - rows) / wall)  # the first tokens come from the prefills


def submitted(backbone, rows: int, max_new: int) -> tuple[int, float]:
    """Tokens and seconds of ``rows`` answers submitted at once, to the last outcome."""
    from engine.serving.worker import GenerationWorker

    worker = GenerationWorker(backbone.model, max_batch=8)
    requests = product_requests(backbone, rows, max_new)
    t0 = time.perf_counter()
    tickets = [worker.submit(r) for r in requests]
    tokens = sum(len(t.result().tokens) for t in tickets)
    seconds = time.perf_counter() - t0
    worker.close()
    return tokens, seconds


def profile_main(backbone, max_new: int) -> None:
    """Eight rows' driven steps under cProfile (the serving loop's and streamer's functions)."""
    from engine.serving.request import Ticket
    from engine.serving.worker import GenerationWorker

    worker = GenerationWorker(backbone.model, max_batch=8)
    batches = []
    with torch.no_grad():
        for r in product_requests(backbone, 8, max_new):
            worker._admit(worker._prefilled(Ticket(r, lambda: None)), batches)
        profile = cProfile.Profile()
        profile.enable()
        while batches:
            batches = [b for b in batches if worker._step(b)]
        profile.disable()
    worker.close()
    stats = pstats.Stats(profile).sort_stats("cumulative")
    stats.print_stats("serving|streamer|stops", 20)


def loop_main(backbone, max_new: int) -> None:
    clock = ForwardClock(backbone.model)
    submitted(backbone, 1, 8)  # warm-up
    for rows in (1, 8):
        d = driven_steps(backbone, clock, rows, max_new)
        print(f"{rows} row(s), driven: {d['steps']} steps, {d['tokens']} tokens; median step "
              f"{d['step']:.1f} ms = forward {d['forward']:.1f} ms + host {d['host']:.1f} ms "
              f"({100 * d['host'] / d['step']:.0f}%), host CPU time {d['host_cpu']:.2f} ms; "
              f"{d['tps']:.1f} tokens/s decoding")
    for rows in (1, 8):
        tokens, seconds = submitted(backbone, rows, max_new)
        print(f"{rows} answer(s) submitted: {tokens} tokens in {seconds:.2f} s = "
              f"{tokens / seconds:.1f} tokens/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--length", type=int, default=800, help="positions cached before stepping")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--loop", action="store_true", help="the worker's step and its host share")
    ap.add_argument("--max-new", type=int, default=128, help="--loop: tokens an answer at most")
    ap.add_argument("--profile", action="store_true", help="--loop: eight rows under cProfile")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default=None,
                    help="cast the backbone's weights (not with --loop)")
    args = ap.parse_args()
    if args.loop and args.dtype:
        ap.error("--dtype times the steps alone; the loop runs the product's backbone as loaded")
    backbone = load_backbone(Settings.from_env())
    model = backbone.model.eval()
    if args.dtype:
        model = model.to(getattr(torch, args.dtype))
    if args.loop:
        print(f"torch threads {torch.get_num_threads()}, load average "
              f"{os.getloadavg()[0]:.2f}, {model.device}, {model.dtype}")
        (profile_main if args.profile else loop_main)(backbone, args.max_new)
        return
    print(f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.2f}, "
          f"{args.length} positions cached, {model.dtype}")
    if args.dtype:
        for rows in (1, 8):
            print(f"{rows} row(s), prefill of {args.length} positions: "
                  f"{prefill_ms(model, rows, args.length):.0f} ms")
    ms = {(rows, grow): step_ms(model, rows, args.length, args.steps, grow)
          for rows in (1, 8) for grow in (False, True)}
    for (rows, grow), v in ms.items():
        print(f"{rows} row(s), {'growing' if grow else 'dynamic'} cache: {v:.1f} ms a step")
    for grow in (False, True):
        print(f"{'growing' if grow else 'dynamic'}: 8 rows / 1 row = {ms[8, grow] / ms[1, grow]:.2f}")
    for rows in (1, 8):
        print(f"{rows} row(s): growing / dynamic = {ms[rows, True] / ms[rows, False]:.2f}")


if __name__ == "__main__":
    main()
