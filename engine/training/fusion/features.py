"""Steps 1-3 of the fusion's training: the documents (fetched, refused when they are evaluation
data), their trees, queries, routing evidence and memories, each cached on disk, and the
z-scored channel features of every query's gold path (``Features``)."""
from __future__ import annotations

import os
import pickle
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from engine.routing.channels import CHANNELS
from engine.training.data import Query, check_not_evaluation, fetch_packages, usable_queries
from engine.training.fusion.config import KINDS, FusionConfig, log

N_CH = len(CHANNELS)


@dataclass
class Doc:
    """One training or held-out document with what the features and the validation read."""

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
        log(f"{key}: queries {query_kinds(qs)} ({time.perf_counter() - t0:.0f}s)")
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


def query_kinds(queries: list[Query]) -> dict[str, int]:
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
    from engine.routing.query import query_vectors

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
    from engine.routing.fused import read_query, score_channels
    from engine.routing.fusion import features

    feats = features(score_channels(rt, read_query(rt, rq, proj)))
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



def kind_counts(kinds: list[str]) -> dict[str, int]:
    return {k: kinds.count(k) for k in KINDS if k in kinds}

