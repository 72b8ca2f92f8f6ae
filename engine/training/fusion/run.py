"""The fusion's training run: features, fit, held-out report, and (when it wins) the shipped
weights; ``main`` is ``python -m engine.training.fusion``."""
from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import asdict
from pathlib import Path

import torch

from engine.training.config import config_from_args
from engine.training.fusion.config import SHIPPED, FusionConfig, log
from engine.training.fusion.features import (build_features, kind_counts, prepare_documents,
                                             query_features, query_kinds, route_queries)
from engine.training.fusion.fit import fit, to_weights
from engine.training.fusion.report import decide, report_markdown, validate

DESCRIPTION = (
    "Learning the fusion of the routing channels (``engine.routing.fusion.FusionWeights``).")


def run(cfg: FusionConfig, memories: str = "write", ship: bool | None = None,
        memories_only: bool = False) -> dict:
    from engine.memory.backbone import load_backbone
    from engine.memory.parts import load_or_init_parts
    from engine.routing.dense import load_encoder
    from engine.routing.routing_tree import RoutingTree
    from engine.settings import Settings

    t_start = time.perf_counter()
    out = cfg.out_dir
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    settings = Settings.from_env().with_(backbone=cfg.backbone, device="cpu")
    backbone = load_backbone(settings)
    parts = load_or_init_parts(settings, backbone)
    if memories_only:
        prepare_documents(cfg, backbone, parts, None, "write", queries=False)
        return {}
    encoder = load_encoder("cpu")
    docs = prepare_documents(cfg, backbone, parts, encoder, memories)
    proj = parts.router

    # Features of the training documents' queries; route queries of the held-out ones.
    t0 = time.perf_counter()
    groups, kinds, manifest = [], [], []
    val_docs = []
    for d in docs:
        rqs = route_queries(d, backbone, parts, encoder, cfg.query_fraction, out / "cache")
        manifest.append({"key": d.key, "sha256": d.sha, "nodes": len(d.tree),
                         "validation": d.validation, "memories": bool(d.memories),
                         "queries": query_kinds(d.queries)})
        if d.validation:
            val_docs.append((d, rqs))
            continue
        rt = RoutingTree.from_tree(d.tree, d.memories, 0, d.evidence)
        for q, rq in zip(d.queries, rqs):
            if cfg.kind_share.get(q.kind, 0.0) <= 0:
                continue
            grp = query_features(rt, rq, proj, d.tree, q.gold)
            if grp:
                groups.append(grp)
                kinds.append(q.kind)
    feats = build_features(groups, kinds, cfg.kind_share)
    t_feat = time.perf_counter() - t0
    log(f"features: {len(kinds)} queries {kind_counts(kinds)}, {len(feats.gold)} parents "
        f"({t_feat:.0f}s)")
    torch.save(asdict(feats), out / "features.pt")  # Features(**torch.load(...)) reads it

    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tensors of a few thousand rows: threads only add waiting
    w, history = fit(feats, steps=cfg.steps, lr=cfg.lr, tau=cfg.tau, w_sel=cfg.w_sel,
                     l2=cfg.l2, channel_dropout=cfg.channel_dropout, seed=cfg.seed,
                     progress=lambda rec, w: log(f"step {rec['step']} loss {rec['loss']} "
                                                 f"w={w.detach().numpy().round(3).tolist()}"))
    torch.set_num_threads(threads)
    t_fit = time.perf_counter() - t0
    train_docs = [d.key for d in docs if not d.validation]
    learned = to_weights(w, f"learned fusion (engine.training.fusion, "
                            f"trained on {', '.join(Path(k).name for k in train_docs)})")
    learned.to_json(out / "fusion.json")
    log(f"learned: subtree {learned.subtree} own {learned.own} ({t_fit:.1f}s)")

    tables = {}
    for d, rqs in val_docs:
        rows = list(range(len(d.queries)))
        if len(rows) > cfg.max_val_queries:
            rows = sorted(random.Random(cfg.seed).sample(rows, cfg.max_val_queries))
        log(f"validation on {d.key}: {len(rows)} queries")
        tables[d.key] = validate(d, rqs, proj, learned, cfg.k, rows)
        if cfg.k != 1:  # a sharper view: the single best child per parent
            tables[f"{d.key} (k=1)"] = validate(d, rqs, proj, learned, 1, rows)
    table = next(iter(tables.values())) if tables else []
    ok, why = decide(table) if table else (False, "no held-out document")
    do_ship = cfg.ship if ship is None else ship
    shipped = bool(ok and do_ship)
    if shipped:
        SHIPPED.parent.mkdir(parents=True, exist_ok=True)
        learned.to_json(SHIPPED)
    report = {"shipped": shipped, "decision": why, "weights": asdict(learned),
              "documents": manifest, "training_queries": kind_counts(kinds),
              "parents": int(len(feats.gold)), "steps": cfg.steps,
              "seconds": {"features": round(t_feat, 1), "fit": round(t_fit, 1),
                          "total": round(time.perf_counter() - t_start, 1)},
              "loss": history, "config": {k: (str(v) if isinstance(v, Path) else v)
                                          for k, v in asdict(cfg).items()},
              "held_out": tables}
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "report.md").write_text(report_markdown(report))
    log(f"{'SHIPPED to ' + str(SHIPPED) if shipped else 'not shipped'}: {why}")
    return report



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.training.fusion",
                                 description=DESCRIPTION)
    ap.add_argument("--config", required=True, help="a TOML file (configs/train_fusion.toml)")
    ap.add_argument("--out", help="run folder (default: the config's out_dir)")
    ap.add_argument("--memories", choices=("write", "cached", "none"), default="write",
                    help="write missing memories (minutes per manual), use only those cached, "
                         "or train without the memory channel")
    ap.add_argument("--no-ship", action="store_true", help="never write assets/fusion.json")
    ap.add_argument("--memories-only", action="store_true",
                    help="only write the documents' memories into the cache (a background job "
                         "beside a run with --memories cached)")
    args = ap.parse_args(argv)
    cfg = config_from_args(FusionConfig, args.config, args.out)
    if cfg is None:
        return 2
    report = run(cfg, memories=args.memories, ship=False if args.no_ship else None,
                 memories_only=args.memories_only)
    if report:
        print(report_markdown(report))
    return 0
