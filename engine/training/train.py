"""Training the small parts: H2MT 3.4 / appendix E and ArcAligner's three stages (3.5).

    python -m engine.training --config configs/train_cpu.toml [--out DIR] [--fresh]
                           [--max-steps N]

The backbone stays frozen; only ``H2MTParts`` train. A run is a list of stages from the config,
each with its own optimiser, steps, learning rate and loss weights:

- ``writer``      L_LM (+ L_AE when weighted): e_write, e_read, the memory scale (and Agg's
                  parameters, when the policy has any). Node memories are computed with
                  gradients through the backbone on short texts (``max_tokens``). Choice: an
                  internal node's aggregated prefix m~_v comes from its first children's
                  memories computed without gradients on their own local text (one level of the
                  bottom-up schedule, not the whole subtree) to keep steps short.
- ``route_writer`` L_route backpropagated into the writer (appendix E: "gradients to the
                  routing projections (and upstream memory construction)"): e_write, e_read and
                  the memory scale, so that the read slot's final hidden state separates a
                  parent's children for the questions asked about them. Per query, one parent
                  on its gold path is drawn; the gold child and up to ``negatives`` other
                  children get memories with gradients (their texts cut to ``max_tokens``), the
                  query vector too, and the loss is the per-parent cross-entropy (3.4) over that
                  sample of C(p) with the router's projections as they are (not trained here).
                  Choices: an internal child's prefix m~_v and each document's centre come from
                  the memories written when the stage started (detached; a snapshot that goes
                  stale as the writer moves, refreshed only by the stages after it), because
                  recomputing a subtree per example would cost minutes a step on a CPU.
- ``router``      L_route + L_sel (softmax relaxation of top-k, appendix E) on cached memories:
                  W_q, W_k. Costs seconds. The best step by validation hit@k with the real hard
                  top-k router (``engine.routing.router.route``) on held-out documents is kept.
- ``align_recon`` ArcAligner stage I: L_AE, decode a node's text from its slot; projector +
                  masked LoRA, gate off.
- ``align_task``  ArcAligner stage II: L_gen on routed memories (the product's own prompt, the
                  router's own hard top-k selection, the gold leaf added if the route missed it),
                  projector + LoRA, gate off.
- ``align_gate``  ArcAligner stage III: the same with the gate on, straight-through estimator
                  (eq. 7), projector + LoRA + gates.

Memories of the training documents and the queries' vectors are cached in the run folder under
the writer's fingerprint: stages after ``writer`` see memories written by the trained writer
(recomputed once, automatically), as the product will.

Resumable: after every ``save_every`` steps and at the end of each stage the run folder holds
``parts.safetensors`` (all parts), ``optim.pt`` (the current stage's optimiser) and
``state.json`` (stage, step); a restarted run continues from there. Batches are drawn from a
generator seeded by (seed, stage, step), so a resumed run sees the batches an uninterrupted one
would. ``log.jsonl`` gets one line per step (losses, seconds); ``summary.json`` and
``final.safetensors`` are written at the end.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm import tqdm

from engine.routing import hits
from engine.answer.modes import prompt_around_slots
from engine.training.losses import (answer_loss, memory_lm_loss, reconstruction_loss, route_loss,
                                    selection_loss)
from engine.memory.parts import H2MTParts
from engine.routing.router import RoutingTree, query_ids, query_vectors, route
from engine.memory.projections import normalise, centre
from engine.training.data import (Query, check_not_evaluation, fetch_packages, generated_queries,
                                  heading_queries, load_queries, save_queries, sentence_queries,
                                  usable_queries, sha256_file)
from engine.document.tree import Tree
from engine.document.build import build_tree
from engine.memory.writer import _Item, read_out, read_out_differentiable, write_memories

STAGES = ("writer", "route_writer", "router", "align_recon", "align_task", "align_gate")
ROOT = Path(__file__).resolve().parents[2]


# -- configuration -------------------------------------------------------------------------------

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
    tied: bool = False  # router: one shared projection, W_k = W_q (see router_loss)
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
        kw = {k: v for k, v in raw.items()}
        for key in ("data_dir", "shared_dir", "out_dir"):
            if key in kw:
                p = Path(kw[key])
                kw[key] = p if p.is_absolute() else ROOT / p
        return cls(stages=stages, **kw)


# -- the run's data ------------------------------------------------------------------------------

@dataclass
class RunData:
    trees: dict[str, Tree]  # document key -> tree
    train_docs: list[str]
    val_docs: list[str]
    queries: list[Query]
    manifest: dict
    sha256: dict[str, str] = field(default_factory=dict)  # document key -> file sha256


def _resolve(doc: str, root: Path) -> Path:
    p = Path(doc)
    return p if p.is_absolute() else root / doc


def prepare_data(cfg: TrainConfig, backbone, log=print) -> RunData:
    """Fetch the packages, check the documents are not evaluation data, build the trees, and
    make (once per run folder) the queries."""
    records = fetch_packages(cfg.packages, cfg.data_dir) if cfg.packages else []
    root = cfg.data_dir / "root"
    keys = list(dict.fromkeys(cfg.documents + cfg.validation))
    paths = {k: _resolve(k, root) for k in keys}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"training documents not found: {', '.join(missing)}")
    check_not_evaluation(list(paths.values()), cfg.shared_dir)
    encode, decode = backbone.encode, backbone.decode
    trees = {}
    for k, p in paths.items():
        trees[k] = build_tree(p, encode, decode, limit=cfg.node_token_limit)
        log(f"tree {k}: {len(trees[k])} nodes")
    sha = {k: sha256_file(p) for k, p in paths.items()}
    manifest = {"packages": records,
                "documents": [{"key": k, "sha256": sha[k], "nodes": len(trees[k]),
                               "validation": k in cfg.validation} for k in keys]}
    queries = []
    for k in keys:
        queries += document_queries(cfg, k, trees[k], sha[k], backbone)
    queries = usable_queries(queries)
    kinds: dict[str, int] = {}
    for q in queries:
        kinds[q.kind] = kinds.get(q.kind, 0) + 1
    manifest["queries"] = kinds
    log(f"queries: {kinds}")
    return RunData(trees, [k for k in cfg.documents if k not in cfg.validation],
                   list(cfg.validation), queries, manifest, sha)


def document_queries(cfg: TrainConfig, key: str, tree: Tree, sha: str, backbone) -> list[Query]:
    """One document's queries, made once and kept in the run folder under the document's
    sha256 (so adding a document to a run makes only its own). The generator is seeded by the
    run seed and the document, not by its position in the config."""
    path = cfg.out_dir / "queries" / f"{Path(key).stem}-{sha[:12]}.jsonl"
    if path.exists():
        return load_queries(path)
    rng = random.Random(f"{cfg.seed}:{sha}")
    queries = []
    if cfg.heading_queries:
        queries += heading_queries(key, tree, rng)
    if cfg.sentence_queries:
        queries += sentence_queries(key, tree, rng)
    if cfg.generated_per_doc:
        bar = tqdm(total=cfg.generated_per_doc, desc=f"questions {Path(key).name}",
                   file=sys.stderr)
        queries += generated_queries(key, tree, backbone, rng, cfg.generated_per_doc,
                                     progress=lambda done, total: bar.update(done - bar.n))
        bar.close()
    save_queries(queries, path)
    return queries


# -- cached memories ------------------------------------------------------------------------------

@dataclass
class MemoryCache:
    fingerprint: str
    memories: dict[str, torch.Tensor]  # doc -> [N, d] float32, rows by node id
    query_vectors: torch.Tensor  # [Q, d], rows as RunData.queries


def _memory_path(run: "Run", fingerprint: str, doc: str) -> Path:
    return run.cfg.out_dir / "memories" / f"{fingerprint[:12]}-{run.data.sha256[doc][:12]}.pt"


def ensure_memories(run: "Run") -> MemoryCache:
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
        path = _memory_path(run, fp, k)
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


# -- routing supervision ---------------------------------------------------------------------------

@dataclass
class RoutingPairs:
    """Every (query, routed parent on a gold path) pair, padded: H2MT 3.4's gold paths with
    gold sets propagated to ancestors."""

    query: torch.Tensor  # [P] query row
    children: torch.Tensor  # [P, C] global node rows (0 at padding)
    mask: torch.Tensor  # [P, C] a child exists
    gold: torch.Tensor  # [P, C] the child is on a gold path (the gold set G(p))
    single: torch.Tensor  # [P] index of the gold child when G(p) has one element, else -1


def gold_sets(tree: Tree, gold: list[int]) -> dict[int, set[int]]:
    """parent -> its children that lie on a path from the root to a gold node."""
    out: dict[int, set[int]] = {}
    for g in gold:
        path = [n.id for n in tree.path(g)]
        for parent, child in zip(path, path[1:]):
            out.setdefault(parent, set()).add(child)
    return out


def routing_pairs(trees: dict[str, Tree], offsets: dict[str, int], queries: list[Query],
                  rows: list[int]) -> RoutingPairs:
    qs, kids, golds = [], [], []
    for r in rows:
        q = queries[r]
        tree = trees[q.doc]
        for parent, gset in gold_sets(tree, q.gold).items():
            ch = [c.id for c in tree.children(parent)]
            qs.append(r)
            kids.append([offsets[q.doc] + c for c in ch])
            golds.append([c in gset for c in ch])
    width = max(len(c) for c in kids)
    P = len(kids)
    children = torch.zeros(P, width, dtype=torch.long)
    mask = torch.zeros(P, width, dtype=torch.bool)
    gold = torch.zeros(P, width, dtype=torch.bool)
    for i, (c, g) in enumerate(zip(kids, golds)):
        children[i, : len(c)] = torch.tensor(c)
        mask[i, : len(c)] = True
        gold[i, : len(g)] = torch.tensor(g)
    n_gold = gold.sum(1)
    single = torch.where(n_gold == 1, gold.float().argmax(1), torch.full_like(n_gold, -1))
    return RoutingPairs(torch.tensor(qs), children, mask, gold, single)


def routing_hit(tree: Tree, selected: list[int], gold: list[int]) -> bool:
    """The evaluation's hit rule (engine.routing.hits) for one query whose gold items are nodes."""
    return hits.routing_hit(selected, hits.gold_regions(tree, [{g} for g in gold])).hit


# -- the run -------------------------------------------------------------------------------------

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


def trainable(parts: H2MTParts, stage: str) -> list[torch.nn.Parameter]:
    """The parameters one stage trains (everything else in the parts stays as it is)."""
    a = parts.aligner
    writer = [parts.e_write, parts.e_read, parts.log_memory_scale, *parts.agg.parameters()]
    groups = {
        "writer": writer,
        "route_writer": writer,  # the same parameters, trained on L_route
        "router": list(parts.router.parameters()),
        "align_recon": [*a.projector.parameters(), *a.lora.parameters()],
        "align_task": [*a.projector.parameters(), *a.lora.parameters()],
        "align_gate": [*a.projector.parameters(), *a.lora.parameters(), *a.gates.parameters()],
    }
    return groups[stage]


def _nodes_with_text(run: Run, docs: list[str]) -> list[tuple[str, int]]:
    return [(d, n.id) for d in docs for n in run.data.trees[d].preorder() if n.local_text.strip()]


def writer_loss(run: Run, st: StageConfig, batch: list[tuple[str, int]]) -> dict[str, torch.Tensor]:
    """L_LM (+ L_AE) of H2MT 3.4 with memories computed with gradients (see module docstring)."""
    bb, parts = run.backbone, run.parts
    items, texts = [], []
    for i, (doc, nid) in enumerate(batch):
        tree = run.data.trees[doc]
        ids = bb.encode(tree.node(nid).local_text)[: st.max_tokens]
        prefix = None
        if not tree.is_leaf(nid):
            kids = tree.children(nid)[:8]
            kid_items = [_Item(c.id, bb.encode(c.local_text)[: st.max_tokens], None) for c in kids]
            km = read_out(bb, parts, kid_items)  # [c, d], no gradients
            agg = parts.agg(km[None], torch.ones(1, len(kids), dtype=torch.bool, device=km.device))[0]
            prefix = parts.memory_as_input(agg.float())
        items.append(_Item(i, ids, prefix))
        texts.append(ids)
    m = read_out_differentiable(bb, parts, items)
    slots = parts.memory_as_input(m)
    out = {"lm": memory_lm_loss(bb, slots, texts)}
    if st.w_ae:
        out["ae"] = reconstruction_loss(bb, slots, texts)
    out["loss"] = st.w_lm * out["lm"] + st.w_ae * out.get("ae", 0.0)
    return out


def recon_loss(run: Run, st: StageConfig, batch: list[tuple[str, int]]) -> dict[str, torch.Tensor]:
    """ArcAligner stage I: L_AE from the projected slot through the masked LoRA."""
    bb, aligner = run.backbone, run.parts.aligner
    cache = ensure_memories(run)
    mem = torch.stack([cache.memories[d][n] for d, n in batch]).to(bb.device)
    texts = [bb.encode(run.data.trees[d].node(n).local_text)[: st.max_tokens] for d, n in batch]
    loss = reconstruction_loss(bb, aligner.project(mem), texts, aligner=aligner)
    return {"ae": loss, "loss": loss}


def retrieved_slots(run: Run, st: StageConfig, row: int) -> list[int]:
    """The memories L_gen conditions on: the router's hard top-k route for the query (the
    product's retrieval), the gold nodes added when it missed them, at most ``max_slots``."""
    q = run.data.queries[row]
    cache = ensure_memories(run)
    rt = run.routing_tree(q.doc)
    selected = route(rt, cache.query_vectors[row], run.parts.router, k=st.k).selected
    tree = run.data.trees[q.doc]
    if not routing_hit(tree, selected, q.gold):
        selected = list(q.gold) + selected
    keep = list(dict.fromkeys([g for g in selected if g in q.gold] + selected))[: st.max_slots]
    return sorted(keep)  # document order, as the memory mode


def gen_loss(run: Run, st: StageConfig, rows: list[int]) -> dict[str, torch.Tensor]:
    """ArcAligner stages II/III: L_gen with the memory mode's prompt (engine.answer.modes)."""
    bb, aligner = run.backbone, run.parts.aligner
    cache = ensure_memories(run)
    prefixes, masks, answers = [], [], []
    for r in rows:
        q = run.data.queries[r]
        ids = retrieved_slots(run, st, r)
        slots = aligner.project(cache.memories[q.doc][ids].to(bb.device))
        head, tail = prompt_around_slots(bb, q.question)
        prefixes.append(torch.cat([head.to(bb.device), slots, tail.to(bb.device)]))
        masks.append(torch.cat([torch.zeros(len(head), dtype=torch.bool),
                                torch.ones(len(ids), dtype=torch.bool),
                                torch.zeros(len(tail), dtype=torch.bool)]))
        answers.append(bb.decode(bb.encode(q.answer)[: st.max_tokens]))
    loss = answer_loss(bb, prefixes, answers, slot_masks=masks, aligner=aligner)
    return {"gen": loss, "loss": loss}


@torch.no_grad()
def validate_routing(run: Run, k: int, rows: list[int]) -> dict[str, float]:
    """hit@k of the real hard top-k router on held-out queries, overall and per kind."""
    cache = ensure_memories(run)
    trees = {d: run.routing_tree(d) for d in {run.data.queries[r].doc for r in rows}}
    hits: dict[str, list[bool]] = {}
    for r in rows:
        q = run.data.queries[r]
        sel = route(trees[q.doc], cache.query_vectors[r], run.parts.router, k=k).selected
        h = routing_hit(run.data.trees[q.doc], sel, q.gold)
        hits.setdefault("all", []).append(h)
        hits.setdefault(q.kind, []).append(h)
    return {f"hit@{k}_{kind}": sum(v) / len(v) for kind, v in hits.items()}


def router_loss(run: Run, st: StageConfig, pairs: RoutingPairs, mn: torch.Tensor,
                qn: torch.Tensor, n_queries: int) -> dict[str, torch.Tensor]:
    """L_route + L_sel over the pairs, per query (scores as router.RouterProjections.score).

    ``tied``: keys go through W_q too (W_k is set to W_q after each step, see run_stage), so
    the score is a learned metric (W q)^T (W m) on the shared space of the writer's read-outs.
    q and m come from the same writer; with half the parameters it did slightly better on a
    held-out manual than separate W_q, W_k in side runs (10.7-12.5% against 8.6-11.1% hit@3;
    assets/MODEL_CARD.md). Used by configs/train_cpu_more.toml, not by the shipped recipe."""
    proj = run.parts.router
    keys = (proj.w_q if st.tied else proj.w_k)(mn)  # [N, d_h], every node once
    q = proj.w_q(qn[pairs.query])  # [P, d_h]
    scores = torch.einsum("pcd,pd->pc", keys[pairs.children], q) / math.sqrt(proj.d_head)
    one = pairs.single >= 0
    l_route = (route_loss(scores[one], pairs.mask[one], pairs.single[one], st.tau)
               if one.any() else scores.sum() * 0)
    l_sel = selection_loss(scores, pairs.mask, pairs.gold, st.tau)
    return {"route": l_route / n_queries, "sel": l_sel / n_queries,
            "loss": (st.w_route * l_route + st.w_sel * l_sel) / n_queries}


@dataclass
class WriterSnapshot:
    """The memories written when the ``route_writer`` stage started: internal children's
    prefixes m~_v and the documents' centres during that stage (module docstring)."""

    fingerprint: str
    memories: dict[str, torch.Tensor]
    centres: dict[str, torch.Tensor]


def writer_snapshot(run: Run, index: int, start_step: int) -> WriterSnapshot:
    """Memories under the writer the stage started from: the current one at step 0 (recorded
    in the run folder), the recorded one when the stage resumes (its caches are kept)."""
    path = run.cfg.out_dir / f"snapshot-stage{index}.json"
    if start_step and path.exists():
        fp = json.loads(path.read_text())["fingerprint"]
        mems = {k: torch.load(_memory_path(run, fp, k)) for k in run.data.trees}
    else:
        cache = ensure_memories(run)
        fp, mems = cache.fingerprint, cache.memories
        path.write_text(json.dumps({"fingerprint": fp}))
    return WriterSnapshot(fp, mems, {k: centre(m) for k, m in mems.items()})


def _snapshot_item(run: Run, st: StageConfig, snap: WriterSnapshot, doc: str, nid: int,
                   key: int) -> _Item:
    """A node's writer input: its text (cut to max_tokens) and, for an internal node, the
    aggregated prefix of its children's snapshot memories."""
    bb, parts, tree = run.backbone, run.parts, run.data.trees[doc]
    text = tree.node(nid).local_text
    ids = bb.encode(text)[: st.max_tokens] if text.strip() else []
    prefix = None
    if not tree.is_leaf(nid):
        kids = [c.id for c in tree.children(nid)]
        km = snap.memories[doc][kids].to(bb.device)
        agg = parts.agg(km[None], torch.ones(1, len(kids), dtype=torch.bool, device=km.device))[0]
        prefix = parts.memory_as_input(agg.float())
    return _Item(key, ids, prefix)


def writer_route_loss(run: Run, st: StageConfig, rows: list[int], snap: WriterSnapshot,
                      rng: random.Random) -> dict[str, torch.Tensor]:
    """L_route (3.4) with gradients into the writer (appendix E), on a sample of each drawn
    parent's children: the gold child first, then up to ``negatives`` others."""
    bb, parts = run.backbone, run.parts
    q_items: list[_Item] = []
    m_items: list[_Item] = []
    groups: list[tuple[str, int, int]] = []  # (doc, first candidate row, candidates)
    for r in rows:
        q = run.data.queries[r]
        tree = run.data.trees[q.doc]
        choices = [(p, g) for p, g in gold_sets(tree, q.gold).items()
                   if len(tree.children(p)) > len(g)]  # a parent with something to prune
        if not choices:
            continue
        parent, gold = rng.choice(choices)
        others = [c.id for c in tree.children(parent) if c.id not in gold]
        cands = [rng.choice(sorted(gold))] + rng.sample(others, min(st.negatives, len(others)))
        q_items.append(_Item(len(q_items), query_ids(bb, q.question, run.cfg.query_fraction), None))
        groups.append((q.doc, len(m_items), len(cands)))
        m_items.extend(_snapshot_item(run, st, snap, q.doc, c, len(m_items)) for c in cands)
    if not groups:
        zero = parts.e_read.sum() * 0
        return {"route": zero, "acc": zero.detach(), "loss": zero}
    qv = read_out_differentiable(bb, parts, q_items)
    mv = read_out_differentiable(bb, parts, m_items)
    width = max(n for _, _, n in groups)
    scores = torch.zeros(len(groups), width, device=qv.device)
    mask = torch.zeros(len(groups), width, dtype=torch.bool, device=qv.device)
    for i, (doc, start, n) in enumerate(groups):
        mu = snap.centres[doc].to(qv.device)
        s = parts.router.score(normalise(qv[i], mu), normalise(mv[start:start + n], mu))
        scores[i, :n] = s
        mask[i, :n] = True
    gold = torch.zeros(len(groups), dtype=torch.long, device=qv.device)
    loss = route_loss(scores, mask, gold, st.tau) / len(groups)
    acc = (scores.masked_fill(~mask, float("-inf")).argmax(1) == 0).float().mean()
    return {"route": loss, "acc": acc.detach(), "loss": loss}


def _normalised_tables(run: Run, docs: list[str]):
    """Centred, normalised memories of ``docs`` stacked (the router's inputs) and offsets."""
    cache = ensure_memories(run)
    offsets, rows = {}, []
    n = 0
    for d in docs:
        mem = cache.memories[d]
        offsets[d] = n
        rows.append(normalise(mem, centre(mem)))  # as RoutingTree.centre
        n += len(mem)
    return torch.cat(rows), offsets


def run_stage(run: Run, index: int, st: StageConfig, start_step: int, budget: list[int]) -> bool:
    """Train one stage from ``start_step``; False when the step budget ran out (resumable)."""
    parts, cfg = run.parts, run.cfg
    params = trainable(parts, st.name)
    if st.name == "router" and st.tied:
        params = [parts.router.w_q.weight]
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
    aligner.gate_enabled = st.name == "align_gate"
    aligner.train(st.name == "align_gate")  # straight-through gate only in stage III
    train_rows = [i for i, q in enumerate(run.data.queries) if q.doc in run.data.train_docs]
    val_rows = [i for i, q in enumerate(run.data.queries) if q.doc in run.data.val_docs]
    val_rows = random.Random(cfg.seed).sample(val_rows, min(len(val_rows), cfg.max_val_queries))
    pool: list = []
    extra = {}
    if st.name in ("writer", "align_recon"):
        pool = _nodes_with_text(run, run.data.train_docs)
    elif st.name in ("align_task", "align_gate"):
        pool = [r for r in train_rows if run.data.queries[r].answer]
    elif st.name == "route_writer":
        pool = train_rows
        snap = writer_snapshot(run, index, start_step)
    else:  # router
        pool = train_rows
        mn, offsets = _normalised_tables(run, list(run.data.trees))
        cache = ensure_memories(run)
        mu = {d: centre(cache.memories[d]) for d in run.data.trees}
        qn = torch.stack([normalise(cache.query_vectors[i], mu[q.doc])
                          for i, q in enumerate(run.data.queries)])
        extra = {"mn": mn, "qn": qn, "offsets": offsets}
        best = {"hit": -1.0, "state": None, "step": 0}
        if start_step and (cfg.out_dir / "router_best.pt").exists():
            best = torch.load(cfg.out_dir / "router_best.pt")
    if not pool:
        raise ValueError(f"stage {st.name}: no training examples")
    bar = tqdm(total=st.steps, initial=start_step, desc=f"{index}:{st.name}", file=sys.stderr)
    step = start_step
    for step in range(start_step, st.steps):
        if budget[0] <= 0:
            bar.close()
            save_state(run, index, step, opt)
            return False
        t0 = time.perf_counter()
        rng = run.batch_rng(index, step)
        batch = rng.sample(pool, min(st.batch, len(pool)))
        if st.name == "writer":
            losses = writer_loss(run, st, batch)
        elif st.name == "route_writer":
            losses = writer_route_loss(run, st, batch, snap, rng)
        elif st.name == "align_recon":
            losses = recon_loss(run, st, batch)
        elif st.name == "router":
            pairs = routing_pairs(run.data.trees, extra["offsets"], run.data.queries, batch)
            losses = router_loss(run, st, pairs, extra["mn"], extra["qn"], len(batch))
        else:
            losses = gen_loss(run, st, batch)
        opt.zero_grad(set_to_none=True)
        losses["loss"].backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if st.name == "router" and st.tied:
            with torch.no_grad():
                parts.router.w_k.weight.copy_(parts.router.w_q.weight)
        budget[0] -= 1
        row = {"stage": st.name, "index": index, "step": step + 1,
               "seconds": round(time.perf_counter() - t0, 3)}
        row |= {k: round(float(v.detach()), 5) for k, v in losses.items()}
        if st.name == "router" and ((step + 1) % st.eval_every == 0 or step + 1 == st.steps):
            val = validate_routing(run, st.k, val_rows)
            row |= val
            hit = val[f"hit@{st.k}_all"]
            if hit > best["hit"]:
                best = {"hit": hit, "step": step + 1,
                        "state": {k: v.clone() for k, v in parts.router.state_dict().items()}}
                torch.save(best, cfg.out_dir / "router_best.pt")
        run.record(**row)
        bar.set_postfix(loss=f"{row['loss']:.4f}")
        bar.update(1)
        if (step + 1) % cfg.save_every == 0 and step + 1 < st.steps:
            save_state(run, index, step + 1, opt)
    bar.close()
    if st.name == "router" and best["state"] is not None:
        parts.router.load_state_dict(best["state"])
        run.log(f"router: kept step {best['step']} (validation hit@{st.k} {best['hit']:.3f})")
    parts.requires_grad_(False)
    aligner.train(False)
    aligner.gate_enabled = True
    save_state(run, index + 1, 0, None)
    return True


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


def save_state(run: Run, stage_index: int, step: int, opt) -> None:
    out = run.cfg.out_dir
    run.parts.save(out / "parts.partial.safetensors", backbone=run.backbone.name)
    (out / "parts.partial.safetensors").replace(out / "parts.safetensors")
    if opt is not None:
        torch.save({"stage": stage_index, "optim": opt.state_dict()}, out / "optim.pt")
    (out / "state.json").write_text(json.dumps({"stage": stage_index, "step": step}))


def _truncate_log(path: Path, cfg: TrainConfig, state: dict) -> None:
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


class RunSetupError(ValueError):
    """A run that cannot start as asked (a user's mistake, reported without a traceback)."""


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
        backbone = load_backbone(Settings.from_env().with_(backbone=cfg.backbone, device=cfg.device))
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
        _truncate_log(out / "log.jsonl", cfg, state)
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
    try:
        cfg = TrainConfig.from_toml(args.config)
    except (OSError, ValueError, TypeError) as e:
        print(f"error: bad config {args.config}: {e}", file=sys.stderr)
        return 2
    if args.out:
        cfg.out_dir = Path(args.out).resolve()
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
