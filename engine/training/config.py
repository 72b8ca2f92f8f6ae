"""A training run's configuration: the run (``TrainConfig``, read from a TOML file under
configs/) and its stages (``StageConfig``), each with its own steps, learning rate and loss
weights.

``STAGES`` lists the stages in their usual order; ``engine.training.stages`` holds one handler per
name and checks its table against this list.
"""
from __future__ import annotations

import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

STAGES = ("writer", "route_writer", "router", "align_recon", "align_task", "align_gate")
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class StageConfig:
    name: str
    steps: int
    lr: float = 1e-3
    batch: int = 8
    weight_decay: float = 0.0
    max_tokens: int = 64  # node text / answer tokens per example (backbone-backprop stages)
    w_lm: float = 1.0  # writer: L_LM
    w_ae: float = 0.0  # writer: L_AE (through the writer's own input scale)
    w_route: float = 1.0  # router: L_route
    w_sel: float = 1.0  # router: L_sel
    tau: float = 1.0  # routing temperature of the relaxation
    k: int = 3  # per-parent top-k of the route (validation and L_gen's retrieval)
    max_slots: int = 32  # L_gen: at most this many memory slots (the gold kept)
    eval_every: int = 50  # router: validation interval
    tied: bool = False  # router: one shared projection, W_k = W_q (see stages.router)
    negatives: int = 4  # route_writer: other children of the parent scored with the gold one

    def __post_init__(self) -> None:
        if self.name not in STAGES:
            raise ValueError(f"unknown stage {self.name!r}; choose from {', '.join(STAGES)}")
        if self.steps < 0 or self.batch < 1 or self.lr <= 0:
            raise ValueError(f"stage {self.name}: steps >= 0, batch >= 1 and lr > 0 are required")


@dataclass
class TrainConfig:
    packages: list[str]  # Debian documentation packages (apt-get download)
    documents: list[str]  # files to train on: paths under <data_dir>/root, or absolute paths
    validation: list[str]  # held-out documents (routing validation, never trained on)
    stages: list[StageConfig]
    data_dir: Path = ROOT / "data" / "train"
    shared_dir: Path = ROOT.parent / "shared"
    out_dir: Path = ROOT / "runs" / "cpu"
    backbone: str = "smollm2"
    device: str | None = None
    seed: int = 0
    node_token_limit: int = 256
    heading_queries: bool = True
    sentence_queries: bool = True
    generated_per_doc: int = 100  # backbone-written questions per document
    query_fraction: float = 0.5  # as the product's AskOptions.query_fraction (H2MT 3.3)
    save_every: int = 25
    max_val_queries: int = 400

    @classmethod
    def from_toml(cls, path: str | Path) -> "TrainConfig":
        raw = tomllib.loads(Path(path).read_text())
        stages = [StageConfig(**s) for s in raw.pop("stages", [])]
        return cls(stages=stages, **resolve_folders(raw))


def resolve_folders(raw: dict) -> dict:
    """A recipe's folders (data_dir, shared_dir, out_dir) as paths, relative ones under ROOT."""
    kw = dict(raw)
    for key in ("data_dir", "shared_dir", "out_dir"):
        if key in kw:
            p = Path(kw[key])
            kw[key] = p if p.is_absolute() else ROOT / p
    return kw


def config_from_args(cls, path: str, out: str | None):
    """The recipe at ``path`` (``cls.from_toml``) with its out_dir set to ``out`` when given; None
    after one error line on stderr when the file is unreadable or wrong."""
    try:
        cfg = cls.from_toml(path)
    except (OSError, ValueError, TypeError) as e:
        print(f"error: bad config {path}: {e}", file=sys.stderr)
        return None
    if out:
        cfg.out_dir = Path(out).resolve()
    return cfg
