"""Phase one of indexing, split and counted: tree building, node evidence encoding, passage
vectors (``store_unit_vectors``), how many texts each encodes, and which texts recur.

    OMP_NUM_THREADS=1 python -m bench.index_counts FILE [FILE...] [--no-encode] [--profile]

Per file, into a fresh SQLite library in a temporary folder (nothing of the user's library is
touched): the seconds and the texts of each part, then the exact duplicates between the node
evidence texts, the passage texts of each kind (``unit_vectors.texts_of``: units and heading
paths for the passage ranker, windows for the linear score) and the manual's sentences read
after an answer (kind ``sentences``: split from every node's text), as counts of distinct
texts. ``--no-encode``: counts only (the tree is still built). ``--profile``: the passage
vectors' seconds split by cProfile (cumulative): the encoder model's forward, its Linear
layers, counting word pieces for the sort, the SQL writes; the rest is tokenising, pooling,
copies and digests. The settings are read from the environment (``H2MT_WINDOW_PRECISION``,
``H2MT_EVIDENCE_PRECISION``).
One JSON line per file.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from engine.answer.passages import unit_vectors as uv
from engine.answer.passages.evidence import split_sentences
from engine.answer.passages.passage_index import index_for
from engine.ingest import (SharedVectors, build_document_tree, evidence_encoder, file_sha256,
                           source_file, store_unit_vectors, tree_evidence)
from engine.routing.evidence import evidence_text, has_evidence
from engine.runtime import Runtime
from engine.settings import Settings
from storage import DocumentMeta


# (key, file name ending, function name) of the parts ``--profile`` reports
PROFILED = (("forward", "sentence_transformers/base/model.py", "forward"),
            ("linear", "~", "<built-in method torch._C._nn.linear>"),
            ("word_pieces", "engine/routing/dense.py", "_lengths"),
            ("sql_writes", "storage/unit_vectors.py", "add_unit_vectors"))


def profiled(call) -> tuple[object, dict]:
    """``call()``'s result and the cumulative seconds of the ``PROFILED`` parts."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    result = prof.runcall(call)
    split = dict.fromkeys((k for k, _, _ in PROFILED), 0.0)
    for (file, _, name), (_, _, _, cum, _) in pstats.Stats(prof).stats.items():
        for key, ending, fn in PROFILED:
            if name == fn and file.endswith(ending):
                split[key] += cum
    return result, {k: round(v, 2) for k, v in split.items()}


def measure(path: Path, rt: Runtime, encode: bool, profile: bool = False) -> dict:
    out: dict = {"file": path.name}
    shared = SharedVectors(evidence_encoder(rt))  # as ingest: the evidence's precision
    t0 = time.perf_counter()
    tree = build_document_tree(path, rt, shared)
    out["tree_s"] = round(time.perf_counter() - t0, 1)
    out["pages"], out["nodes"] = tree.pages, len(tree)
    out["tree_encoded"] = len(shared.vectors)  # an induced tree's chunks
    ev_texts = [evidence_text(tree, i) for i in range(len(tree)) if has_evidence(tree, i)]
    ev = {t for t in ev_texts if t.strip()}
    out["evidence_texts"], out["evidence_distinct"] = len(ev_texts), len(ev)
    if encode:
        t1 = time.perf_counter()
        evidence = tree_evidence(tree, rt, shared)
        out["evidence_s"] = round(time.perf_counter() - t1, 1)
    else:
        from engine.routing.evidence import compute_evidence
        evidence = compute_evidence(tree, None)
    out["evidence_encoded"] = len(shared.vectors) - out["tree_encoded"]
    doc = rt.library.add_document(
        DocumentMeta(title=tree.title or path.stem, file_name=path.name, sha256=file_sha256(path),
                     pages=tree.pages, tree_ms=0.0, memory_ms=0.0),
        tree, evidence=evidence, source=source_file(path, tree.text_layer_pdf))
    index = index_for(rt.cache, doc, rt.library.get_document(doc).sha256, tree)
    units = set(uv.texts_of(index, uv.UNITS))
    wins = set(uv.texts_of(index, uv.WINDOWS))
    sents = {s for n in tree.preorder() for s in split_sentences(n.text) if s.strip()}
    kind = uv.quote_kind(rt.settings.passage_ranker_path is not None)
    out["passage_kind"] = kind
    out["passage_units"] = len(index.passages)
    out["units_distinct"], out["windows_distinct"] = len(units), len(wins)
    out["sentences_distinct"] = len(sents)
    q = units if kind == uv.UNITS else wins
    out["dup_evidence_x_passages"] = len(ev & q)
    out["dup_evidence_x_sentences"] = len(ev & sents)
    out["dup_passages_x_sentences"] = len(q & sents)
    out["dup_units_x_windows"] = len(units & wins)
    out["dup_any_pair"] = len((ev & q) | (ev & sents) | (q & sents))
    if encode:
        t2, c2 = time.perf_counter(), time.process_time()
        if profile:
            added, out["passages_profile_s"] = profiled(lambda: store_unit_vectors(doc, rt))
        else:
            added = store_unit_vectors(doc, rt)
        out["passages_s"] = round(time.perf_counter() - t2, 1)
        out["passages_cpu_s"] = round(time.process_time() - c2, 1)
        out["window_precision"] = rt.settings.window_precision
        out["passages_encoded"] = added
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--no-encode", action="store_true")
    p.add_argument("--profile", action="store_true", help="split the passage vectors' seconds")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_env(data_dir=Path(tmp), cache_dir=Settings().cache_dir)
        rt = Runtime.load(settings)
        for f in args.files:
            print(json.dumps(measure(f, rt, not args.no_encode, args.profile)), flush=True)


if __name__ == "__main__":
    main()
