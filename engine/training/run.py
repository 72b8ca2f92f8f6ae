"""A run in progress (``Run``): its configuration, backbone, parts, data and log, and the
memories it trains on.

Memories of the training documents and the queries' vectors are cached in the run folder under
the writer's fingerprint: stages after ``writer`` see memories written by the trained writer
(recomputed once, automatically), as the product will.
"""
from __future__ import annotations

import hashlib
import json
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from engine.memory.parts import H2MTParts
from engine.memory.writer import write_memories
from engine.routing.query import query_vectors
from engine.routing.routing_tree import RoutingTree
from engine.training.config import TrainConfig
from engine.training.corpus import RunData


@dataclass
class MemoryCache:
    fingerprint: str
    memories: dict[str, torch.Tensor]  # doc -> [N, d] float32, rows by node id
    query_vectors: torch.Tensor  # [Q, d], rows as RunData.queries


@dataclass
class Run:
    cfg: TrainConfig
    backbone: object
    parts: H2MTParts
    data: RunData
    log_file: Path
    cache: MemoryCache | None = None
    routing_trees: dict = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    def log(self, msg: str) -> None:
        print(f"[train {time.perf_counter() - self.started:7.1f}s] {msg}", file=sys.stderr, flush=True)

    def record(self, **row) -> None:
        with open(self.log_file, "a") as f:
            f.write(json.dumps(row) + "\n")

    # -- helpers --
    def routing_tree(self, doc: str) -> RoutingTree:
        """The document's routed structure over the cached memories (built once per writer)."""
        cache = ensure_memories(self)
        key = (doc, cache.fingerprint)
        if key not in self.routing_trees:
            mem = cache.memories[doc]
            self.routing_trees[key] = RoutingTree.from_tree(
                self.data.trees[doc], {i: mem[i] for i in range(len(mem))})
        return self.routing_trees[key]

    def batch_rng(self, stage_index: int, step: int) -> random.Random:
        return random.Random(hash((self.cfg.seed, stage_index, step)) & 0xFFFFFFFF)


def memory_path(run: Run, fingerprint: str, doc: str) -> Path:
    """Where one document's memories under the writer ``fingerprint`` are kept."""
    return run.cfg.out_dir / "memories" / f"{fingerprint[:12]}-{run.data.sha256[doc][:12]}.pt"


def ensure_memories(run: Run) -> MemoryCache:
    """Memories and query vectors under the current writer, from the run folder or computed.

    Kept per document (``memories/<writer>-<document sha256>.pt``) and per query set, so a
    document added to a run is the only one written."""
    fp = run.parts.fingerprint(run.backbone.name)
    if run.cache is not None and run.cache.fingerprint == fp:
        return run.cache
    folder = run.cfg.out_dir / "memories"
    folder.mkdir(parents=True, exist_ok=True)
    mems = {}
    for k, tree in run.data.trees.items():
        path = memory_path(run, fp, k)
        if path.exists():
            mems[k] = torch.load(path)
            continue
        run.log(f"writing memories of {k} ({len(tree)} nodes) under writer {fp[:12]}")
        bar = tqdm(total=len(tree), desc=f"memories {Path(k).name}", file=sys.stderr)
        m = write_memories(tree, run.backbone, run.parts,
                           progress=lambda done, total: bar.update(done - bar.n))
        bar.close()
        mems[k] = torch.stack([m[i] for i in range(len(tree))]).float().cpu()
        torch.save(mems[k], path.with_suffix(".partial"))
        path.with_suffix(".partial").replace(path)
    asked = hashlib.sha256("\n".join([str(run.cfg.query_fraction)]
                                     + [q.question for q in run.data.queries]).encode())
    qpath = folder / f"{fp[:12]}-queries-{asked.hexdigest()[:12]}.pt"
    if qpath.exists():
        qv = torch.load(qpath)
    else:
        qv = query_vectors([q.question for q in run.data.queries], run.backbone, run.parts,
                           run.cfg.query_fraction)
        torch.save(qv, qpath)
    run.cache = MemoryCache(fp, mems, qv)
    return run.cache
