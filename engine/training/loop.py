"""One stage's optimisation loop (``run_stage``), the same for every stage: the stage's handler
(``engine.training.stages``) says which parameters train, what a batch is drawn from and what
its loss is; the loop owns the optimiser (AdamW, gradients clipped to norm 1), the step budget,
the log line per step and the run folder's saves."""
from __future__ import annotations

import sys
import time

import torch
from tqdm import tqdm

from engine.training.config import StageConfig
from engine.training.run import Run
from engine.training.stages import HANDLERS
from engine.training.state import save_state


def run_stage(run: Run, index: int, st: StageConfig, start_step: int, budget: list[int]) -> bool:
    """Train one stage from ``start_step``; False when the step budget ran out (resumable)."""
    parts, cfg = run.parts, run.cfg
    stage = HANDLERS[st.name](run, index, st)
    params = stage.optimised()
    parts.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=st.lr, weight_decay=st.weight_decay)
    optim_path = cfg.out_dir / "optim.pt"
    if start_step and optim_path.exists():
        saved = torch.load(optim_path)
        if saved.get("stage") == index:
            opt.load_state_dict(saved["optim"])
    aligner = parts.aligner
    aligner.gate_enabled = stage.gate
    aligner.train(stage.gate)  # straight-through gate only in stage III
    pool = stage.examples(start_step)
    if not pool:
        raise ValueError(f"stage {st.name}: no training examples")
    bar = tqdm(total=st.steps, initial=start_step, desc=f"{index}:{st.name}", file=sys.stderr)
    for step in range(start_step, st.steps):
        if budget[0] <= 0:
            bar.close()
            save_state(run, index, step, opt)
            return False
        t0 = time.perf_counter()
        rng = run.batch_rng(index, step)
        batch = rng.sample(pool, min(st.batch, len(pool)))
        losses = stage.loss(batch, rng)
        opt.zero_grad(set_to_none=True)
        losses["loss"].backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        stage.after_step()
        budget[0] -= 1
        row = {"stage": st.name, "index": index, "step": step + 1,
               "seconds": round(time.perf_counter() - t0, 3)}
        row |= {k: round(float(v.detach()), 5) for k, v in losses.items()}
        row |= stage.evaluate(step + 1)
        run.record(**row)
        bar.set_postfix(loss=f"{row['loss']:.4f}")
        bar.update(1)
        if (step + 1) % cfg.save_every == 0 and step + 1 < st.steps:
            save_state(run, index, step + 1, opt)
    bar.close()
    stage.finish()
    parts.requires_grad_(False)
    aligner.train(False)
    aligner.gate_enabled = True
    save_state(run, index + 1, 0, None)
    return True
