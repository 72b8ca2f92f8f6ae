"""Training the small parts: H2MT 3.4 / appendix E and ArcAligner's three stages (3.5).

    python -m engine.training --config configs/train_cpu.toml [--out DIR] [--fresh]
                           [--max-steps N] [--from-stage STAGE]

The backbone stays frozen; only ``H2MTParts`` train. A run is a list of stages from the config
(``config``), each with its own optimiser, steps, learning rate and loss weights; each stage's
parameters, data and loss are in ``stages``, the loop that trains one in ``loop``. This module
drives a run: it starts or resumes it (``state``), prepares its data (``corpus``), trains the
stages in order and writes the summary.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace

import torch

from engine.memory.parts import H2MTParts
from engine.training.config import STAGES, TrainConfig, config_from_args
from engine.training.corpus import prepare_data
from engine.training.loop import run_stage
from engine.training.run import Run
from engine.training.state import reset_stages, truncate_log


class RunSetupError(ValueError):
    """A run that cannot start as asked (a user's mistake, reported without a traceback)."""


def preparing_device(cfg: TrainConfig, max_steps: int | None) -> str:
    """Where the backbone loads: the config's device to train, the CPU when the run only
    prepares its data (``--max-steps 0``: trees and questions, made on a machine without the
    config's GPU before a short GPU run)."""
    return "cpu" if max_steps == 0 else cfg.device


def train(cfg: TrainConfig, *, backbone=None, fresh: bool = False,
          max_steps: int | None = None, from_stage: str | None = None) -> dict:
    """Run (or resume) the configured stages; returns the summary (also in summary.json).

    ``from_stage``: keep the run folder's parts but train again from the start of that stage
    (and every later one), e.g. the router and the aligner after documents were added."""
    from engine.memory.backbone import load_backbone
    from engine.settings import Settings

    out = cfg.out_dir
    if fresh and out.exists():
        import shutil

        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    if backbone is None:
        device = preparing_device(cfg, max_steps)
        backbone = load_backbone(Settings.from_env().with_(backbone=cfg.backbone, device=device))
    if backbone.dtype != torch.float32:
        # the parts train in float32, as the memories they read are written on a CPU (a GPU
        # loads the backbone in bf16 for inference)
        backbone = replace(backbone, model=torch.nn.Module.float(backbone.model), dtype=torch.float32)
    state = json.loads((out / "state.json").read_text()) if (out / "state.json").exists() else None
    if from_stage is not None:
        names = [st.name for st in cfg.stages]
        if from_stage not in names:
            raise RunSetupError(f"--from-stage {from_stage}: the config's stages are {names}")
        if state is None:
            raise RunSetupError(f"--from-stage needs a run folder with trained parts: {out}")
        state = {"stage": names.index(from_stage), "step": 0}
        (out / "state.json").write_text(json.dumps(state))
    if state is not None:
        parts = H2MTParts.load(out / "parts.safetensors")
        truncate_log(out / "log.jsonl", cfg, state)
        if from_stage is not None:
            names = [st.name for st in cfg.stages]
            reset_stages(parts, names[state["stage"]:], backbone, cfg.seed,
                         kept=names[:state["stage"]])
    else:
        parts = H2MTParts(backbone.hidden_size, "mean").init_from_backbone(backbone)
        state = {"stage": 0, "step": 0}
    parts = parts.to(backbone.device)
    run = Run(cfg, backbone, parts, None, out / "log.jsonl")  # type: ignore[arg-type]
    run.data = prepare_data(cfg, backbone, log=run.log)
    (out / "manifest.json").write_text(json.dumps(run.data.manifest, indent=1))
    (out / "config.json").write_text(json.dumps(asdict(cfg), indent=1, default=str))
    budget = [max_steps if max_steps is not None else 1 << 62]
    t0 = time.perf_counter()
    for i, st in enumerate(cfg.stages):
        if i < state["stage"]:
            continue
        start = state["step"] if i == state["stage"] else 0
        run.log(f"stage {i} {st.name}: steps {start}..{st.steps}")
        if not run_stage(run, i, st, start, budget):
            run.log("step budget used up; run again to resume")
            return {"finished": False}
        state = {"stage": i + 1, "step": 0}
    summary = summarise(run, time.perf_counter() - t0)
    parts.save(out / "final.safetensors", backbone=backbone.name,
               training=json.dumps({k: summary[k] for k in ("stages", "documents", "packages")}))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    run.log(f"done: {out / 'final.safetensors'}")
    return summary


def summarise(run: Run, seconds: float) -> dict:
    """Per stage: steps, seconds, first and last mean losses (over 10 steps), from the log."""
    rows = [json.loads(line) for line in open(run.log_file)] if run.log_file.exists() else []
    stages = []
    for index, st in enumerate(run.cfg.stages):
        mine = [r for r in rows if r.get("index", index) == index and r["stage"] == st.name]
        first, last = mine[:10], mine[-10:]
        mean = (lambda rs: round(sum(r["loss"] for r in rs) / len(rs), 4) if rs else None)
        vals = {k: v for r in mine for k, v in r.items() if k.startswith("hit@")}
        stages.append({"name": st.name, "steps": len(mine),
                       "seconds": round(sum(r["seconds"] for r in mine), 1),
                       "loss_first10": mean(first), "loss_last10": mean(last), **vals})
    return {"finished": True, "seconds_this_invocation": round(seconds, 1),
            "device": str(run.backbone.device), "backbone": run.backbone.name, "stages": stages,
            "documents": run.data.manifest["documents"], "packages": run.data.manifest["packages"],
            "queries": run.data.manifest["queries"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.training",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True, help="a TOML file (see configs/)")
    ap.add_argument("--out", help="run folder (default: the config's out_dir)")
    ap.add_argument("--fresh", action="store_true", help="discard the run folder and start over")
    ap.add_argument("--max-steps", type=int, help="stop after this many steps (resume later)")
    ap.add_argument("--from-stage", choices=STAGES,
                    help="keep the run's parts, train again from this stage on")
    args = ap.parse_args(argv)
    cfg = config_from_args(TrainConfig, args.config, args.out)
    if cfg is None:
        return 2
    if args.from_stage and args.fresh:
        print("error: --from-stage keeps the run folder; it cannot go with --fresh", file=sys.stderr)
        return 2
    try:
        summary = train(cfg, fresh=args.fresh, max_steps=args.max_steps,
                        from_stage=args.from_stage)
    except RunSetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({k: v for k, v in summary.items() if k != "documents"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
