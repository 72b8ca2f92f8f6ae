"""The run folder's resumable state, and training again from a stage.

Resumable: after every ``save_every`` steps and at the end of each stage the run folder holds
``parts.safetensors`` (all parts), ``optim.pt`` (the current stage's optimiser) and
``state.json`` (stage, step); a restarted run continues from there. Batches are drawn from a
generator seeded by (seed, stage, step), so a resumed run sees the batches an uninterrupted one
would. ``log.jsonl`` gets one line per step (losses, seconds); ``summary.json`` and
``final.safetensors`` are written at the end.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from engine.memory.parts import H2MTParts
from engine.training.config import TrainConfig
from engine.training.run import Run
from engine.training.stages import trainable


def save_state(run: Run, stage_index: int, step: int, opt) -> None:
    """Save the parts, the stage's optimiser (when given) and where to resume (stage, step)."""
    out = run.cfg.out_dir
    run.parts.save(out / "parts.partial.safetensors", backbone=run.backbone.name)
    (out / "parts.partial.safetensors").replace(out / "parts.safetensors")
    if opt is not None:
        torch.save({"stage": stage_index, "optim": opt.state_dict()}, out / "optim.pt")
    (out / "state.json").write_text(json.dumps({"stage": stage_index, "step": step}))


def truncate_log(path: Path, cfg: TrainConfig, state: dict) -> None:
    """Drop the log lines of steps after the saved state (they are trained again on resume)."""
    if not path.exists():
        return
    order = {st.name: i for i, st in enumerate(cfg.stages)}
    keep = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        i = row.get("index", order.get(row["stage"], -1))
        if i < state["stage"] or (i == state["stage"] and row["step"] <= state["step"]):
            keep.append(line)
    path.write_text("".join(f"{line}\n" for line in keep))


def reset_stages(parts: H2MTParts, stages: list[str], backbone, seed: int,
                 kept: list[str] = ()) -> None:
    """Put the parts that ``stages`` train back to their initialisation (the random ones drawn
    as a run from scratch draws them, after ``torch.manual_seed(seed)``), so training again
    from a stage gives what a run from scratch would, given the earlier stages' parts.

    Parameters that a ``kept`` (earlier) stage trains too, the writer's for ``route_writer``,
    keep their current values: what the earlier stage left cannot be recovered, and the
    initialisation would throw that stage away."""
    keep = {id(p) for stage in kept for p in trainable(parts, stage)}
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        fresh = H2MTParts(parts.d_model, parts.aggregation, aligner=parts.aligner_config,
                          **parts.agg_opts).init_from_backbone(backbone)
    with torch.no_grad():
        for stage in stages:
            for mine, init in zip(trainable(parts, stage), trainable(fresh, stage), strict=True):
                if id(mine) not in keep:
                    mine.copy_(init.to(mine.device, mine.dtype))
