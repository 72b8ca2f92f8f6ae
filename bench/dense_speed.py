"""Speed (and, with --quality, flat retrieval quality) of the dense channel's sentence encoder.

    python -m bench.dense_speed                       # the ngspice manual, chosen vs plain setting
    python -m bench.dense_speed --doc ../shared/corpus/beamer-userguide.pdf
    python -m bench.dense_speed --settings 128:fp32,128:int8,256:fp32 --quality

The document's tree is built as ingest builds it (``document.build_tree`` with the backbone's
tokenizer, node limit from the settings, contents/index hygiene) and every node's evidence text
(``routing.evidence.evidence_text``: heading path, newline, body) is encoded once per setting,
as phase one of ingest does. Printed per setting: seconds of wall time, seconds of CPU time of
this process (all threads), texts per second, and the load average (other processes on the
machine slow the wall time down; the CPU time is steadier).

A setting is ``SEQ:PRECISION`` (word pieces kept per text, ``fp32``, ``int8`` or ``bf16``: the
float32 model's texts read in bfloat16, ``dense.BFloat16Texts``, questions in float32), or
``chosen`` (the engine's defaults, ``engine.routing.dense``) or ``plain`` (the model as
published: 256 word pieces, float32).

``--quality``: flat dense retrieval over every node with evidence of each question's document,
on the question files (default: ../shared/bench/manuals/dev_qa.jsonl and the ORD-QA dev split):
hit@1/3/5/10 (some gold node, or a node inside a gold node's subtree, among the first k) and
the mean reciprocal rank of the first such node. A measurement to choose a setting by, not a
tuning target.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from engine.routing import dense

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
DEFAULT_DOC = SHARED / "corpus" / "ngspice-manual.pdf"
DEFAULT_QUESTIONS = [SHARED / "bench" / "manuals" / "dev_qa.jsonl",
                     SHARED / "bench" / "ordqa" / "ordqa_dev.jsonl"]
ORDQA_DOC = SHARED / "bench" / "ordqa" / "openroad_documentation.json"


def parse_setting(spec: str) -> tuple[str, int, str]:
    """'chosen' | 'plain' | 'SEQ:fp32' | 'SEQ:int8' | 'SEQ:bf16' -> (label, max_seq_length,
    precision) with precision "none", "int8" or "bf16"."""
    spec = spec.strip()
    if spec == "chosen":
        seq, quant = dense.DEFAULT_MAX_SEQ_LENGTH, dense.DEFAULT_QUANTIZE
    elif spec == "plain":
        seq, quant = 256, "none"
    else:
        s, _, p = spec.partition(":")
        seq, quant = int(s), {"fp32": "none", "int8": "int8", "none": "none",
                        "bf16": "bf16"}[p or "fp32"]
    return spec, seq, quant


def build_texts(path: Path, tokenizer, limit: int):
    from engine.document.build import build_tree
    from engine.routing.evidence import evidence_text

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=True)

    t0 = time.perf_counter()
    tree = build_tree(path, encode, decode, limit)
    build_s = time.perf_counter() - t0
    return tree, [evidence_text(tree, i) for i in range(len(tree))], build_s


def make_encoder(device: str | None, seq: int, precision: str):
    """The encoder of one setting: a ``SentenceEncoder``, read in bfloat16 for "bf16"."""
    if precision == "bf16":
        return dense.BFloat16Texts(dense.SentenceEncoder(device, max_seq_length=seq))
    return dense.SentenceEncoder(device, max_seq_length=seq, quantize=precision)


def time_encode(enc, texts: list[str]) -> dict:
    enc.encode(texts[:16])  # warm-up: first-call allocations
    load0 = os.getloadavg()[0]
    w0, c0 = time.perf_counter(), time.process_time()
    vectors = enc.encode(texts)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    n = sum(1 for t in texts if t.strip())
    return dict(wall=wall, cpu=cpu, texts=n, per_s=n / wall if wall else float("nan"),
                load=(load0 + os.getloadavg()[0]) / 2, vectors=vectors)


def speed(args, settings, tokenizer) -> None:
    import torch

    tree, texts, build_s = build_texts(Path(args.doc), tokenizer, args.limit)
    have = [t for t in texts if t.strip()]
    pieces = [len(x) for x in dense_tokenizer()(have)["input_ids"]] if have else [0]
    print(f"document      {Path(args.doc).name}: {tree.pages} pages, {len(tree)} nodes, "
          f"{len(have)} with evidence text, {sum(map(len, have)):,} characters "
          f"(tree built in {build_s:.1f} s)")
    print(f"word pieces   median {statistics.median(pieces):.0f}, "
          f"over 128: {np.mean(np.array(pieces) > 128):.0%}, "
          f"over 256: {np.mean(np.array(pieces) > 256):.0%}")
    print(f"machine       {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}")
    print(f"{'setting':10s} {'fingerprint':52s} {'wall s':>7s} {'cpu s':>7s} {'texts/s':>8s} "
          f"{'load':>5s}")
    results = {}
    for label, seq, quant in settings:
        enc = make_encoder(args.device, seq, quant)
        r = time_encode(enc, texts)
        results[label] = r
        print(f"{label:10s} {enc.fingerprint:52s} {r['wall']:7.1f} {r['cpu']:7.1f} "
              f"{r['per_s']:8.1f} {r['load']:5.1f}", flush=True)
    labels = list(results)
    if len(labels) > 1:
        ref = results[labels[-1]]["vectors"]
        for label in labels[:-1]:
            cos = np.sum(results[label]["vectors"] * ref, axis=1)[[bool(t.strip()) for t in texts]]
            print(f"cosine {label} vs {labels[-1]}: mean {cos.mean():.4f}, min {cos.min():.4f}")


_DENSE_TOK = None


def dense_tokenizer():
    global _DENSE_TOK
    if _DENSE_TOK is None:
        from transformers import AutoTokenizer

        _DENSE_TOK = AutoTokenizer.from_pretrained(str(dense.model_path()), local_files_only=True)
    return _DENSE_TOK


def quality(args, settings, tokenizer) -> None:
    from bench.metrics import gold_regions, manual_gold, ordqa_gold

    rows = []
    for f in args.questions:
        for line in Path(f).read_text(encoding="utf-8").splitlines():
            if line.strip():
                q = json.loads(line)
                q["_path"] = SHARED / "corpus" / q["doc"] if "doc" in q else ORDQA_DOC
                q["_set"] = Path(f).stem
                rows.append(q)
    trees = {}
    for q in rows:
        if q["_path"] not in trees:
            tree, texts, _ = build_texts(q["_path"], tokenizer, args.limit)
            trees[q["_path"]] = (tree, texts)
    for q in rows:
        tree = trees[q["_path"]][0]
        gold = manual_gold(tree, q["gold"]) if "gold" in q else ordqa_gold(tree, q["reference"])
        q["_region"] = set().union(*gold_regions(tree, gold))
    sets = sorted({q["_set"] for q in rows})
    print(f"quality: {len(rows)} questions ({', '.join(sets)}) over "
          f"{sum(sum(1 for t in x[1] if t) for x in trees.values())} nodes of {len(trees)} "
          "documents; flat dense retrieval over each document's nodes with evidence")
    print(f"{'setting':10s} {'set':12s} {'n':>3s} {'@1':>4s} {'@3':>4s} {'@5':>4s} {'@10':>4s} "
          f"{'MRR':>6s}")
    for label, seq, quant in settings:
        enc = make_encoder(args.device, seq, quant)
        ranks: dict[str, list[int]] = {s: [] for s in sets}
        for path, (tree, texts) in trees.items():
            ids = [i for i, t in enumerate(texts) if t]
            vec = enc.encode([texts[i] for i in ids])
            for q in (q for q in rows if q["_path"] == path):
                order = np.argsort(-(vec @ enc.encode_query(q["question"])), kind="stable")
                hit = [r for r, j in enumerate(order, 1) if ids[j] in q["_region"]]
                ranks[q["_set"]].append(hit[0] if hit else len(order) + 1)
        for s in sets:
            r = np.array(ranks[s])
            print(f"{label:10s} {s:12s} {len(r):3d} " +
                  " ".join(f"{int((r <= k).sum()):4d}" for k in (1, 3, 5, 10)) +
                  f" {float(np.mean(1.0 / r)):6.3f}", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--doc", default=str(DEFAULT_DOC), help="document to index (speed)")
    ap.add_argument("--settings", default="chosen,plain",
                    help="comma-separated: chosen, plain, or SEQ:fp32 / SEQ:int8 / SEQ:bf16")
    ap.add_argument("--device", default=None, help="cuda / cpu (default: cuda when available)")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    ap.add_argument("--quality", action="store_true", help="also flat retrieval hit@k and MRR")
    ap.add_argument("--quality-only", action="store_true", help="only the quality table")
    ap.add_argument("--questions", nargs="+", default=[str(p) for p in DEFAULT_QUESTIONS])
    args = ap.parse_args(argv)

    import torch

    from engine.memory.backbone import load_tokenizer
    from engine.settings import Settings

    if args.threads:
        torch.set_num_threads(args.threads)
    settings_obj = Settings()
    args.limit = settings_obj.node_token_limit
    tokenizer = load_tokenizer(settings_obj)
    settings = [parse_setting(s) for s in args.settings.split(",") if s.strip()]
    if not args.quality_only:
        speed(args, settings, tokenizer)
    if args.quality or args.quality_only:
        quality(args, settings, tokenizer)


if __name__ == "__main__":
    main()
