"""Fusing the evidence channels into one routing score per node.

Each channel's scores are z-scored over the routed nodes that have them (so BM25's unbounded
scale, cosines and memory logits become comparable), then combined linearly:

    fused(u) = sum_c  w_c^sub * z_c(subtree(u))  +  w_c^own * z_c(own(u))

The fallback, untrained, is a plain sum of the subtree z-scores (w^sub = 1, w^own = 0): the
combination measured before this was built. A learned fusion (``FusionWeights`` trained with
the per-parent routing loss of H2MT 3.4 on cached channel features of the training documents,
``engine.training.fusion``) replaces the weights; it has a handful of parameters.

A channel that is missing (no memories yet, no encoder) is left out of the sum, not zeroed to a
score: the remaining channels' weights apply unchanged. A node whose channel value is NaN (no
evidence in it or its subtree) takes that channel's lowest z-score.

The walk ranks children by the fused score, or by the fused own score max-propagated (the leaf
walks of ``routing.fused``), and the rescue walks keep the paths to the best nodes by fused own
score (``walk_scores``).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from engine.routing.channels import CHANNELS, ChannelScores
from engine.settings import WALKS

# A missing value sits this far below the channel's mean: below every node that has evidence.
MISSING_Z = -3.0

# How many flat-ranked best nodes the rescue walks keep reachable. Measured on the dev sets
# (docs/results.md, issue 24): 6 left one manual question's gold at flat rank 9 pruned; 10
# reaches gold as often as flat RRF on both sets for about 5 more selected nodes a question.
# Rescuing each channel's own top nodes instead (the memory channel's too) selected twice as
# many nodes on ORD-QA for the same hits, so the rescue ranks by the one fused own score.
RESCUE = 10


@dataclass
class FusionWeights:
    """Per-channel weights on the z-scored subtree and own scores."""

    subtree: dict[str, float] = field(default_factory=lambda: {c: 1.0 for c in CHANNELS})
    own: dict[str, float] = field(default_factory=lambda: {c: 0.0 for c in CHANNELS})
    source: str = "z-score sum (untrained)"

    def to_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def from_json(cls, path: str | Path) -> "FusionWeights":
        data = json.loads(Path(path).read_text())
        unknown = set(data.get("subtree", {})) | set(data.get("own", {}))
        if not unknown <= set(CHANNELS):
            raise ValueError(f"{path}: unknown channels {sorted(unknown - set(CHANNELS))}")
        return cls(subtree={c: float(data["subtree"].get(c, 0.0)) for c in CHANNELS},
                   own={c: float(data["own"].get(c, 0.0)) for c in CHANNELS},
                   source=str(data.get("source", Path(path).name)))


def zscore(x: np.ndarray) -> np.ndarray:
    """(x - mean) / std over the finite entries; NaN entries become MISSING_Z."""
    finite = np.isfinite(x)
    out = np.full(x.shape, MISSING_Z, dtype=np.float32)
    if not finite.any():
        return out
    vals = x[finite]
    sd = float(vals.std())
    out[finite] = (vals - vals.mean()) / (sd if sd > 1e-9 else 1.0)
    out[finite] = np.maximum(out[finite], MISSING_Z)
    return out


def features(channels: dict[str, ChannelScores]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """channel -> (z of subtree scores, z of own scores)."""
    return {name: (zscore(ch.subtree), zscore(ch.own)) for name, ch in channels.items()}


def fuse(channels: dict[str, ChannelScores], weights: FusionWeights | None = None
         ) -> tuple[np.ndarray, np.ndarray]:
    """(fused score per node for routing, fused *own* score per node for packing the answer's
    context). Only the channels present are summed."""
    if not channels:
        raise ValueError("fusion needs at least one channel")
    w = weights or FusionWeights()
    feats = features(channels)
    n = len(next(iter(channels.values())).own)
    fused = np.zeros(n, dtype=np.float32)
    fused_own = np.zeros(n, dtype=np.float32)
    for name, (z_sub, z_own) in feats.items():
        fused += w.subtree.get(name, 0.0) * z_sub + w.own.get(name, 0.0) * z_own
        # Packing ranks nodes by their own text's evidence (a parent's subtree score would
        # otherwise put every chapter above the section that carries the answer).
        fused_own += (w.subtree.get(name, 0.0) + w.own.get(name, 0.0)) * z_own
    return fused, fused_own


def walk_scores(tree, fused: np.ndarray, pack: np.ndarray, how: str
                ) -> tuple[np.ndarray, frozenset[int]]:
    """The score the walk ranks children by, and the nodes it must keep (``WALKS``, the walks
    of ``routing.fused``): the fused score, or the fused own score max-propagated (the leaf
    walks); the rescue walks keep the paths to the ``RESCUE`` best nodes by fused own score."""
    if how not in WALKS:
        raise ValueError(f"unknown walk {how!r}; choose one of {', '.join(WALKS)}")
    score = tree.levels.propagate_max(pack) if how.startswith("leaf") else fused
    keep: set[int] = set()
    if how.endswith("rescue"):
        has = (np.flatnonzero(tree.has_evidence) if tree.tokens is not None
               else np.arange(1, len(tree)))  # the root is never a hit
        best = has[np.lexsort((has, -pack[has]))[:RESCUE]]
        for u in best.tolist():
            while u is not None and u not in keep:
                keep.add(u)
                u = tree.parent[u]
    return score, frozenset(keep)
