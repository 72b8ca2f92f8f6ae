"""One decoding step of the bundled backbone, one sequence against eight, with transformers'
``DynamicCache`` (grows by ``torch.cat``) and with the generation worker's growing cache
(``engine.serving.growing_cache``).

    python -m bench.decode_step [--length 800] [--steps 24]

Each batch is prefilled once with random token ids of ``--length`` positions, then stepped
``--steps`` times (one new token per row, as ``engine.serving.batch.DecodeBatch.step`` feeds
them); printed: the median step in ms per batch size and cache, the ratios eight rows / one
row, and growing / dynamic. Run on a quiet machine: the figures are wall times.
"""
from __future__ import annotations

import argparse
import os
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--length", type=int, default=800, help="positions cached before stepping")
    ap.add_argument("--steps", type=int, default=24)
    args = ap.parse_args()
    model = load_backbone(Settings.from_env()).model.eval()
    print(f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.2f}, "
          f"{args.length} positions cached")
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
