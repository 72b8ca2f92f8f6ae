"""Training: a short run of every stage on a tiny random Llama saves, reloads and resumes."""
from __future__ import annotations

import json
from dataclasses import replace
import random

import pytest
import torch

from engine.memory.parts import H2MTParts
from engine.training.config import StageConfig, TrainConfig
from engine.training.stages import trainable
from engine.training.supervision import gold_sets, routing_hit, routing_pairs
from engine.training.train import preparing_device, train
from engine.training.data import Query, check_not_evaluation, heading_queries, sentences
from engine.document.build import build_tree

MANUAL = """# Widget manual

Widgets are small devices that blink. This manual explains how to install and power them.

## Installation

Unpack the widget from its box. Place the widget on a flat surface before you connect it.
Keep the widget away from water at all times.

### Mounting

Mount the widget on the wall with two screws. The screws must be at least 3 cm long.

## Power

Widgets need a 12 V supply. A red light means the battery is low and must be replaced.
The blue light shows that the widget is charging from the mains.

## Troubleshooting

If the widget does not blink, check the fuse first. Replace a blown fuse with a 2 A fuse.
"""

OTHER = """# Gadget guide

Gadgets measure the temperature of a room. They report it every ten minutes.

## Setup

Press the setup button for five seconds. The display shows the current room temperature.

## Calibration

Calibrate the gadget once a year against a reference thermometer in the same room.
"""


def _config(tmp_path, shared_dir, steps: int = 2) -> TrainConfig:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "widgets.md").write_text(MANUAL)
    (docs / "gadgets.md").write_text(OTHER)
    stages = [StageConfig("writer", steps, lr=1e-2, batch=2, max_tokens=16, w_ae=0.5),
              StageConfig("router", steps, lr=1e-2, batch=4, eval_every=1),
              StageConfig("align_recon", steps, lr=1e-2, batch=2, max_tokens=16),
              StageConfig("align_task", steps, lr=1e-2, batch=2, max_tokens=16, max_slots=4),
              StageConfig("align_gate", steps, lr=1e-2, batch=2, max_tokens=16, max_slots=4)]
    return TrainConfig(packages=[], documents=[str(docs / "widgets.md"), str(docs / "gadgets.md")],
                       validation=[str(docs / "gadgets.md")], stages=stages,
                       data_dir=tmp_path / "data", shared_dir=shared_dir, out_dir=tmp_path / "run",
                       generated_per_doc=2, save_every=1, node_token_limit=64)


def _log(cfg):
    return [json.loads(line) for line in open(cfg.out_dir / "log.jsonl")]


def test_two_steps_per_stage_save_reload_and_resume(tmp_path, shared_dir, tiny_backbone):
    bb = tiny_backbone
    before = {k: v.clone() for k, v in bb.model.state_dict().items()}
    init = H2MTParts(bb.hidden_size, "mean").init_from_backbone(bb)
    cfg = _config(tmp_path, shared_dir)

    # Interrupted after 3 steps (the writer's 2 and one router step), then resumed.
    assert train(cfg, backbone=bb, max_steps=3) == {"finished": False}
    state = json.loads((cfg.out_dir / "state.json").read_text())
    assert state == {"stage": 1, "step": 1}
    summary = train(cfg, backbone=bb)
    assert summary["finished"]
    log = _log(cfg)
    assert [(r["stage"], r["step"]) for r in log] == [
        (s, i) for s in ("writer", "router", "align_recon", "align_task", "align_gate") for i in (1, 2)]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in log)

    trained = H2MTParts.load(cfg.out_dir / "final.safetensors")
    # every stage moved its own parameters ...
    for stage in ("writer", "router", "align_recon", "align_gate"):
        old = dict(init.named_parameters())
        new = dict(trained.named_parameters())
        names = [n for n, p in init.named_parameters()
                 if any(p is q for q in trainable(init, stage))]
        assert any(not torch.equal(old[n], new[n]) for n in names), stage
    # ... the gate's bias moved only through the straight-through estimator (it never looped)
    g0 = init.aligner.gates[str(init.aligner.gated_layers[0])].mlp[-1].bias
    g1 = trained.aligner.gates[str(trained.aligner.gated_layers[0])].mlp[-1].bias
    assert not torch.equal(g0, g1)
    # ... and the backbone did not move at all
    for k, v in bb.model.state_dict().items():
        assert torch.equal(v, before[k]), k
    # the writer changed, so the memories were recomputed under the new fingerprint
    assert trained.fingerprint(bb.name) != init.fingerprint(bb.name)
    assert list(cfg.out_dir.glob(f"memories/{trained.fingerprint(bb.name)[:12]}-*.pt"))

    # Resuming from the router's step 2 with one more router step: that step, then the later
    # stages again; the log keeps one line per step (the later stages' old lines are dropped).
    cfg.stages[1].steps = 3
    (cfg.out_dir / "state.json").write_text(json.dumps({"stage": 1, "step": 2}))
    train(cfg, backbone=bb)
    steps = [(r["stage"], r["step"]) for r in _log(cfg)]
    assert steps == ([("writer", 1), ("writer", 2), ("router", 1), ("router", 2), ("router", 3)]
                     + [(s, i) for s in ("align_recon", "align_task", "align_gate") for i in (1, 2)])


def test_from_stage_restarts_later_parts_and_tied_router(tmp_path, shared_dir, tiny_backbone):
    bb = tiny_backbone
    cfg = _config(tmp_path, shared_dir, steps=1)
    cfg.stages = cfg.stages[:3]  # writer, router, align_recon
    train(cfg, backbone=bb)
    first = H2MTParts.load(cfg.out_dir / "parts.safetensors")
    cached = sorted(p.name for p in (cfg.out_dir / "memories").iterdir())
    queries = sorted(p.name for p in (cfg.out_dir / "queries").iterdir())
    assert len(queries) == 2 and len([c for c in cached if "-queries-" not in c]) == 2

    # Train again from the router on, tied, stopped right after the router: the writer is
    # kept (same memories, nothing rewritten), the router restarted from its initialisation
    # with W_k = W_q, and align_recon's parts are back at their initialisation.
    cfg.stages[1].tied = True
    torch.manual_seed(cfg.seed)  # as a run from scratch draws the random initial parts
    init = H2MTParts(bb.hidden_size, "mean").init_from_backbone(bb)
    assert train(cfg, backbone=bb, from_stage="router", max_steps=1) == {"finished": False}
    again = H2MTParts.load(cfg.out_dir / "parts.safetensors")
    assert again.fingerprint(bb.name) == first.fingerprint(bb.name)
    assert sorted(p.name for p in (cfg.out_dir / "memories").iterdir()) == cached
    w = again.router
    assert torch.equal(w.w_q.weight, w.w_k.weight)
    assert not torch.equal(w.w_q.weight, init.router.w_q.weight)  # one step from the init...
    assert not torch.equal(w.w_q.weight, first.router.w_q.weight)  # ...not from the old one
    for mine, fresh in zip(trainable(again, "align_recon"), trainable(init, "align_recon")):
        assert torch.equal(mine, fresh)
    steps = [(r["stage"], r["step"]) for r in _log(cfg)]
    assert steps == [("writer", 1), ("router", 1)]


def test_route_writer_trains_the_writer_on_routing_from_a_snapshot(tmp_path, shared_dir,
                                                                   tiny_backbone):
    """L_route into the writer (appendix E): e_write/e_read move, the router does not; the
    snapshot of memories the stage started from is recorded and found again on resume."""
    bb = tiny_backbone
    cfg = _config(tmp_path, shared_dir, steps=1)
    cfg.stages = [cfg.stages[0], StageConfig("route_writer", 2, lr=1e-2, batch=4, max_tokens=16,
                                             negatives=2, tau=0.1), cfg.stages[1]]
    torch.manual_seed(cfg.seed)
    init = H2MTParts(bb.hidden_size, "mean").init_from_backbone(bb)

    assert train(cfg, backbone=bb, max_steps=2) == {"finished": False}  # writer, 1 route step
    assert json.loads((cfg.out_dir / "state.json").read_text()) == {"stage": 1, "step": 1}
    snap = json.loads((cfg.out_dir / "snapshot-stage1.json").read_text())["fingerprint"]
    kept = [p for p in cfg.out_dir.glob(f"memories/{snap[:12]}-*.pt") if "-queries-" not in p.name]
    assert len(kept) == 2  # one per document
    assert train(cfg, backbone=bb, max_steps=1) == {"finished": False}  # resumed: step 2
    assert json.loads((cfg.out_dir / "snapshot-stage1.json").read_text())["fingerprint"] == snap
    after = H2MTParts.load(cfg.out_dir / "parts.safetensors")
    rows = [r for r in _log(cfg) if r["stage"] == "route_writer"]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["loss"] > 0 and 0 <= r["acc"] <= 1 for r in rows)
    assert after.fingerprint(bb.name) != snap  # the writer moved ...
    assert not torch.equal(after.e_read, init.e_read)
    for mine, fresh in zip(after.router.parameters(), init.router.parameters()):
        assert torch.equal(mine, fresh)  # ... the router did not (its stage comes next)

    # Again from route_writer: the writer's parameters are kept (the writer stage trains them
    # too, and what it left is not recoverable); the router is back at its initialisation.
    assert train(cfg, backbone=bb, from_stage="route_writer", max_steps=0) == {"finished": False}
    again = H2MTParts.load(cfg.out_dir / "parts.safetensors")
    assert torch.equal(again.e_read, after.e_read) and torch.equal(again.e_write, after.e_write)
    assert train(cfg, backbone=bb)["finished"]


def test_gold_paths_are_propagated_to_ancestors(real_tokenizer):
    from engine.document.tree import TreeAssembler

    asm = TreeAssembler("markdown", "root")
    a = asm.add(0, title="A")
    b = asm.add(0, title="B")
    a1 = asm.add(a, title="A1", text="one")
    a2 = asm.add(a, title="A2", text="two")
    asm.add(b, title="B1", text="three")
    tree = asm.finish()
    assert gold_sets(tree, [a2]) == {0: {a}, a: {a2}}
    assert gold_sets(tree, [a1, b]) == {0: {a, b}, a: {a1}}
    pairs = routing_pairs({"d": tree}, {"d": 0}, [Query("d", "x", "q", [a1, b])], [0])
    assert pairs.gold.sum().item() == 3
    assert pairs.single.tolist() == [-1, 0]  # two gold children at the root: L_sel only
    assert routing_hit(tree, [a], [a1]) is False  # an ancestor of the gold is not a hit
    assert routing_hit(tree, [a1], [a]) is True  # inside the gold subtree is


def test_queries_and_the_evaluation_guard(tmp_path, shared_dir, real_tokenizer):
    enc = lambda s: real_tokenizer.encode(s, add_special_tokens=False)  # noqa: E731
    p = tmp_path / "w.md"
    p.write_text(MANUAL)
    tree = build_tree(p, enc, real_tokenizer.decode, limit=64)
    qs = heading_queries("w", tree, random.Random(0))
    assert {tree.node(q.gold[0]).title for q in qs} >= {"Installation", "Power", "Mounting"}
    assert sentences("It is on. Then it blinks! OK") == ["It is on.", "Then it blinks!", "OK"]
    check_not_evaluation([p], shared_dir)
    with pytest.raises(ValueError, match="evaluation data"):
        check_not_evaluation([shared_dir / "corpus" / "etoolbox-manual.pdf"], shared_dir)


def test_the_shipped_checkpoint_is_the_default_only_where_it_fits(tmp_path):
    from engine.settings import SHIPPED_CHECKPOINT, Settings

    auto = Settings()
    assert auto.checkpoint == "auto"
    assert auto.checkpoint_path == (SHIPPED_CHECKPOINT if SHIPPED_CHECKPOINT.is_file() else None)
    assert Settings(backbone=str(tmp_path)).checkpoint_path is None  # another backbone: untrained
    assert Settings(aggregation="gat").checkpoint_path is None  # another policy: untrained
    assert Settings.from_env({"H2MT_CHECKPOINT": "none"}).checkpoint_path is None
    own = tmp_path / "mine.safetensors"
    assert Settings.from_env({"H2MT_CHECKPOINT": str(own)}).checkpoint_path == own


def test_a_missing_checkpoint_is_a_clear_error(tmp_path, tiny_backbone):
    from engine.memory.parts import load_or_init_parts
    from engine.settings import Settings

    with pytest.raises(FileNotFoundError, match="not found"):
        load_or_init_parts(Settings(checkpoint=tmp_path / "nope.safetensors"), tiny_backbone)


def test_usable_queries_drop_generic_and_unrelated_questions():
    from engine.training.data import usable_queries

    qs = [Query("d", "generated", "What is the answer to this question?", [1], "Fuses blow."),
          Query("d", "generated", "What is the answer to this question?", [2], "Screws hold."),
          Query("d", "generated", "Which fuse replaces a blown one?", [3], "Use a 2 A fuse."),
          Query("d", "generated", "What colour is the sky?", [4], "Use a 2 A fuse."),
          Query("d", "heading", "Power", [5])]
    assert [q.gold for q in usable_queries(qs)] == [[3], [5]]


def test_prepared_data_is_kept_and_trains_where_the_documents_are_not(tmp_path, shared_dir,
                                                                      tiny_backbone):
    """A run prepared on one machine (trees and questions in data.pt) trains on another that has
    neither the documents nor their readers; other settings make the data again."""
    cfg = _config(tmp_path, shared_dir, steps=1)
    assert train(cfg, backbone=tiny_backbone, max_steps=0) == {"finished": False}
    assert (cfg.out_dir / "data.pt").is_file()
    for doc in (tmp_path / "docs").iterdir():
        doc.unlink()
    summary = train(cfg, backbone=tiny_backbone)
    assert summary["finished"] and summary["queries"]
    assert [r["stage"] for r in _log(cfg)] == [s.name for s in cfg.stages]
    cfg.node_token_limit = 32  # the trees depend on it: the prepared data no longer fits
    with pytest.raises(FileNotFoundError, match="widgets.md"):
        train(cfg, backbone=tiny_backbone, fresh=False, from_stage="writer")


def test_parts_train_against_a_float32_backbone_when_it_was_loaded_in_bf16(tmp_path, shared_dir,
                                                                           tiny_backbone):
    """A GPU loads the backbone in bf16 for inference; the parts still train (in float32)."""
    import copy
    from dataclasses import replace

    bf16 = replace(tiny_backbone, model=copy.deepcopy(tiny_backbone.model).to(torch.bfloat16),
                   dtype=torch.bfloat16)
    cfg = _config(tmp_path, shared_dir, steps=1)
    cfg.stages = cfg.stages[:2]  # the writer (through the backbone) and the router
    summary = train(cfg, backbone=bf16)
    assert summary["finished"]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in _log(cfg))


def test_data_is_prepared_on_the_cpu_for_a_gpu_config(tmp_path, shared_dir):
    cfg = replace(_config(tmp_path, shared_dir), device="cuda")
    assert preparing_device(cfg, 0) == "cpu"
    assert preparing_device(cfg, None) == "cuda"
    assert preparing_device(cfg, 10) == "cuda"
