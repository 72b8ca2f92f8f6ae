"""The fusion training's recipe (a TOML file) and its progress line."""
from __future__ import annotations

import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from engine.training.config import ROOT, TrainConfig, resolve_folders

SHIPPED = ROOT / "assets" / "fusion.json"
KINDS = ("heading", "generated", "sentence")


@dataclass
class FusionConfig:
    packages: list[str]
    documents: list[str]  # training documents: paths under <data_dir>/root, or absolute
    validation: list[str]  # held-out documents (measured, never trained on)
    data_dir: Path = ROOT / "data" / "train"
    shared_dir: Path = ROOT.parent / "shared"
    out_dir: Path = ROOT / "runs" / "fusion"
    backbone: str = "smollm2"
    seed: int = 0
    node_token_limit: int = 256
    # Queries (engine.training.data): heading and backbone-written ones, sentence queries kept
    # but down-weighted (kind_share).
    heading_queries: bool = True
    sentence_queries: bool = True
    generated_per_doc: int = 200
    query_fraction: float = 0.5  # the memory channel's query vector reads this share (H2MT 3.3)
    # Each kind's share of the training loss (normalised over the kinds present).
    kind_share: dict[str, float] = field(
        default_factory=lambda: {"heading": 1.0, "generated": 1.0, "sentence": 0.25})
    # Training.
    steps: int = 400
    lr: float = 0.05
    tau: float = 1.0
    w_sel: float = 0.0
    l2: float = 1e-3  # pull toward the untrained weights
    channel_dropout: float = 0.3  # per query, each channel dropped with this probability
    # Validation.
    k: int = 3
    max_val_queries: int = 1500
    ship: bool = True  # write assets/fusion.json when the learned fusion wins

    @classmethod
    def from_toml(cls, path: str | Path) -> "FusionConfig":
        return cls(**resolve_folders(tomllib.loads(Path(path).read_text())))

    def train_config(self):
        """The training-data code's view of this recipe (query making and its cache)."""
        return TrainConfig(packages=self.packages, documents=self.documents,
                           validation=self.validation, stages=[], data_dir=self.data_dir,
                           shared_dir=self.shared_dir, out_dir=self.out_dir,
                           backbone=self.backbone, seed=self.seed,
                           node_token_limit=self.node_token_limit,
                           heading_queries=self.heading_queries,
                           sentence_queries=self.sentence_queries,
                           generated_per_doc=self.generated_per_doc,
                           query_fraction=self.query_fraction)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

