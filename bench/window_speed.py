"""The passage windows' encoding speed by encoder setting, side by side (issue 70).

    OMP_NUM_THREADS=1 python -m bench.window_speed FILE [FILE...] \
        [--settings 112:fp32,112:bf16,112:int8] [--slice 256] [--every 1] [--threads 1]

Per file: the tree built as ingest builds it (an induced tree's chunks encoded by the default
encoder), the passage index, and its ``windows`` texts (``unit_vectors.texts_of``: what
``store_unit_vectors`` encodes with the default settings). Printed: the texts' word pieces
(special tokens in, not truncated): median, 90th percentile and the share over each cap of the
settings; then per setting the texts a second, the CPU seconds, and each vector's cosine to the
first setting's (mean, 5th percentile, minimum). The settings take turns on slices of
``--slice`` texts (the encoder's own order, longest first, each slice encoded by every setting
before the next), so the machine's load falls on all of them alike. ``--every K``: every K-th
text of that order is encoded (a big manual's length mix in less time).

A setting is ``SEQ:PRECISION``: ``dense.SentenceEncoder``'s word-piece cap and precision, ``fp32``,
``int8`` (dynamic int8) or ``bf16`` (``dense.BFloat16Texts``, what ``Settings.window_precision``
"auto" picks where the hardware computes bfloat16 natively), with an optional ``:alone`` (batches
of one text: a vector that cannot depend on its batch neighbours).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

from engine.routing import dense


def parse_setting(spec: str) -> tuple[str, int, str, int | None]:
    """'SEQ:fp32' | 'SEQ:int8' | 'SEQ:bf16' [':alone'] -> (label, max_seq_length, precision,
    batch)."""
    parts = spec.strip().split(":")
    seq, prec = int(parts[0]), (parts[1] if len(parts) > 1 else "fp32")
    if prec not in ("fp32", "int8", "bf16") or any(p != "alone" for p in parts[2:]):
        raise SystemExit(f"setting {spec!r}: SEQ:fp32, SEQ:int8 or SEQ:bf16, optionally :alone")
    return spec.strip(), seq, prec, (1 if "alone" in parts[2:] else None)


def window_texts(path: Path) -> tuple[list[str], int, float]:
    """The manual's ``windows`` texts as ``store_unit_vectors`` encodes them; its pages and
    the seconds the tree took."""
    from engine.answer.passages import unit_vectors as uv
    from engine.answer.passages.passage_index import PassageIndex
    from engine.document.build import build_tree
    from engine.memory.backbone import load_tokenizer
    from engine.routing.shared_vectors import SharedVectors
    from engine.settings import Settings

    settings = Settings()
    tok = load_tokenizer(settings)
    shared = SharedVectors(dense.load_encoder("cpu"))
    t0 = time.perf_counter()
    tree = build_tree(path, lambda t: tok.encode(t, add_special_tokens=False),
                      lambda ids: tok.decode(ids, skip_special_tokens=True),
                      settings.node_token_limit, embed=shared.embed,
                      max_nodes=settings.max_nodes)
    tree_s = time.perf_counter() - t0
    return uv.texts_of(PassageIndex.build(None, tree), uv.WINDOWS), tree.pages, tree_s


def word_pieces(texts: list[str]) -> np.ndarray:
    tok = dense.load_encoder("cpu").model.tokenizer
    return np.array([len(x) for x in tok(texts, return_attention_mask=False,
                                         return_token_type_ids=False)["input_ids"]])


def measure(path: Path, settings, slice_size: int, every: int = 1) -> None:
    texts, pages, tree_s = window_texts(path)
    pieces = word_pieces(texts)
    caps = sorted({s[1] for s in settings} | {dense.DEFAULT_MAX_SEQ_LENGTH}, reverse=True)
    print(f"\n{path.name}: {pages} pages, {len(texts):,} window texts (tree {tree_s:.1f} s)")
    print(f"word pieces: median {statistics.median(pieces):.0f}, 90th percentile "
          f"{np.percentile(pieces, 90):.0f}, max {pieces.max()}; over the cap: " + ", ".join(
              f"{c} {np.mean(pieces > c):.1%}" for c in caps))
    order = sorted(range(len(texts)), key=lambda i: (-pieces[i], i))
    texts = [texts[i] for i in order][::every]
    if every > 1:
        print(f"encoded: every {every}th text in the encoder's order, {len(texts):,} texts")
    encoders = []
    for label, seq, prec, batch in settings:
        enc = dense.SentenceEncoder("cpu", max_seq_length=seq, batch_size=batch,
                                    quantize="int8" if prec == "int8" else "none")
        enc = dense.BFloat16Texts(enc) if prec == "bf16" else enc
        enc.encode(texts[-16:])  # first-call allocations
        encoders.append((label, enc))
    vectors = {label: np.zeros((len(texts), dense.DIM), np.float32) for label, _ in encoders}
    wall = dict.fromkeys(vectors, 0.0)
    cpu = dict.fromkeys(vectors, 0.0)
    load = [os.getloadavg()[0]]
    for s in range(0, len(texts), slice_size):
        part = texts[s:s + slice_size]
        for label, enc in encoders:
            w0, c0 = time.perf_counter(), time.process_time()
            vectors[label][s:s + len(part)] = enc.encode(part)
            wall[label] += time.perf_counter() - w0
            cpu[label] += time.process_time() - c0
        load.append(os.getloadavg()[0])
    ref = vectors[encoders[0][0]]
    print(f"load average during the run: {min(load):.1f}-{max(load):.1f}")
    print(f"{'setting':18s} {'wall s':>7s} {'cpu s':>7s} {'texts/s':>8s} {'x':>5s} "
          f"{'cos mean':>8s} {'p5':>6s} {'min':>6s}")
    for label, _ in encoders:
        cos = np.sum(vectors[label] * ref, axis=1)
        print(f"{label:18s} {wall[label]:7.1f} {cpu[label]:7.1f} "
              f"{len(texts) / wall[label]:8.1f} {wall[encoders[0][0]] / wall[label]:5.2f} "
              f"{cos.mean():8.4f} {np.percentile(cos, 5):6.4f} {cos.min():6.4f}", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--settings", default="112:fp32,112:bf16,112:int8",
                    help="comma-separated SEQ:fp32 / SEQ:int8 / SEQ:bf16 [:alone]; the first is "
                         "the baseline")
    ap.add_argument("--slice", type=int, default=256, help="texts a setting encodes per turn")
    ap.add_argument("--every", type=int, default=1, help="encode every K-th text only")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    a = ap.parse_args(argv)
    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    settings = [parse_setting(s) for s in a.settings.split(",") if s.strip()]
    for path in a.files:
        measure(path, settings, a.slice, max(1, a.every))


if __name__ == "__main__":
    main()
