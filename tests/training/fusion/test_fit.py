"""The fusion's fit (engine.training.fusion.fit) on synthetic channel features: fast, no
backbone, no encoder."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.routing.channels import CHANNELS
from engine.routing.fusion import FusionWeights
from engine.training.fusion.features import build_features
from engine.training.fusion.fit import fit, to_weights, untrained_vector

LEX, DENSE, MEM = (CHANNELS.index(c) for c in ("lexical", "dense", "memory"))


def synthetic_groups(n_queries: int = 200, seed: int = 0):
    """Per query two parents of 6 children; the lexical channel puts the gold child ahead
    (noisily), the dense channel is pure noise, the memory channel absent."""
    rng = np.random.default_rng(seed)
    groups, kinds = [], []
    present = np.array([c != "memory" for c in CHANNELS])
    for q in range(n_queries):
        grp = []
        for _ in range(2):
            x = rng.standard_normal((6, len(CHANNELS), 2)).astype(np.float32)
            x[:, MEM] = 0.0
            gold = int(rng.integers(6))
            x[gold, LEX, 0] += 1.5  # informative subtree score
            grp.append((gold, x, present))
        groups.append(grp)
        kinds.append("heading" if q % 2 else "generated")
    return groups, kinds


def test_fit_weights_the_informative_channel_over_noise():
    torch.set_num_threads(1)  # tiny tensors: threads only add synchronisation
    groups, kinds = synthetic_groups()
    feats = build_features(groups, kinds, {"heading": 1.0, "generated": 1.0})
    assert feats.x.shape == (400, 6, len(CHANNELS), 2)
    assert torch.allclose(feats.weight.sum(), torch.tensor(200.0))
    w, history = fit(feats, steps=80, lr=0.08, l2=1e-3, channel_dropout=0.3, log_every=50)
    assert history[-1]["loss"] < history[0]["loss"]
    assert w[LEX, 0] > 1.0 + 0.3  # the informative subtree weight grows...
    assert abs(w[DENSE, 0]) < 0.5 * w[LEX, 0]  # ...the noise channel's shrinks toward 0
    assert w[DENSE, 0] < 1.0
    assert torch.equal(w[MEM], untrained_vector()[MEM])  # absent channel: no gradient


def test_weights_json_round_trip(tmp_path):
    w = untrained_vector()
    w[LEX, 0], w[DENSE, 1] = 1.7, -0.25
    fw = to_weights(w, "test")
    fw.to_json(tmp_path / "fusion.json")
    back = FusionWeights.from_json(tmp_path / "fusion.json")
    assert back.subtree == fw.subtree and back.own == fw.own and back.source == "test"
    assert back.subtree["lexical"] == pytest.approx(1.7)
    assert back.own["dense"] == pytest.approx(-0.25)
