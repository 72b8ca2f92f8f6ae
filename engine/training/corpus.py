"""The run's data: the training and validation documents' trees and the queries asked about
them (made once per run folder), with a manifest of where they came from.

The prepared data is kept in the run folder (``data.pt``) with the settings it was made under,
so a run resumes without rebuilding its trees, and a run folder prepared on one machine trains
on another that has neither the documents nor the libraries that read them (a GPU machine)."""
from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch
from tqdm import tqdm

from engine.document.build import build_tree
from engine.document.tree import Tree
from engine.training.config import TrainConfig
from engine.training.data import (Query, check_not_evaluation, fetch_packages, generated_queries,
                                  heading_queries, load_queries, save_queries, sentence_queries,
                                  sha256_file, usable_queries)


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


PREPARED = "data.pt"


def data_signature(cfg: TrainConfig, backbone_name: str) -> dict:
    """What the prepared data depends on: the documents, the backbone's tokenizer (the trees'
    token limits) and the query settings."""
    return {"documents": list(cfg.documents), "validation": list(cfg.validation),
            "packages": list(cfg.packages), "backbone": backbone_name, "seed": cfg.seed,
            "node_token_limit": cfg.node_token_limit, "heading_queries": cfg.heading_queries,
            "sentence_queries": cfg.sentence_queries, "generated_per_doc": cfg.generated_per_doc}


def load_prepared(cfg: TrainConfig, backbone_name: str) -> RunData | None:
    """The run folder's prepared data when it was made under the same settings, else None."""
    path = cfg.out_dir / PREPARED
    if not path.is_file():
        return None
    saved = torch.load(path, weights_only=False)  # our own run folder's pickle of trees
    if saved["signature"] != data_signature(cfg, backbone_name):
        return None
    return RunData(**saved["data"])


def prepare_data(cfg: TrainConfig, backbone, log=print) -> RunData:
    """The run's data: from the run folder when prepared there under the same settings, else
    fetch the packages, check the documents are not evaluation data, build the trees, make the
    queries (each once per run folder) and keep the result in the run folder."""
    prepared = load_prepared(cfg, backbone.name)
    if prepared is not None:
        log(f"data: {len(prepared.trees)} prepared trees, {len(prepared.queries)} queries "
            f"({cfg.out_dir / PREPARED})")
        return prepared
    data = build_data(cfg, backbone, log)
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    partial = cfg.out_dir / f"{PREPARED}.partial"
    saved = {f.name: getattr(data, f.name) for f in fields(data)}
    torch.save({"signature": data_signature(cfg, backbone.name), "data": saved}, partial)
    partial.replace(cfg.out_dir / PREPARED)
    return data


def build_data(cfg: TrainConfig, backbone, log=print) -> RunData:
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
