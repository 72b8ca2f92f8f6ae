"""Passage vectors encoded in chunks, as ``unit_vectors.precompute`` cuts them, against one call.

    OMP_NUM_THREADS=1 python -m bench.chunk_identity FILE CHUNK

Indexes FILE (phase one, no passage vectors) into a fresh SQLite library in a temporary folder,
puts its passage texts in the encoder's order (``unit_vectors.pending_texts``) and encodes them
in one call and in chunks of CHUNK texts, with the windows' encoder of the settings
(``unit_vectors.encoder_of``: bfloat16 where ``H2MT_WINDOW_PRECISION`` picks it); prints whether
the float32 vectors (and their float16, as stored) are identical.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from engine.answer.passages import unit_vectors as uv
from engine.answer.passages.passage_index import index_for
from engine.ingest import ingest_file
from engine.runtime import Runtime
from engine.settings import Settings


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("file", type=Path)
    p.add_argument("chunk", type=int)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rt = Runtime.load(Settings(data_dir=Path(tmp), cache_dir=Settings().cache_dir))
        doc = ingest_file(args.file, rt, memories=False, unit_vectors=False).doc_id
        index = index_for(rt.cache, doc, rt.library.get_document(doc).sha256,
                          rt.library.get_tree(doc))
        todo = uv.pending_texts(rt, doc, index, uv.WINDOWS)
        enc, step = uv.encoder_of(rt, uv.WINDOWS), args.chunk  # as the settings encode them
        t = time.perf_counter()
        one = enc.encode(todo)
        t1 = time.perf_counter() - t
        t = time.perf_counter()
        parts = np.concatenate([enc.encode(todo[s:s + step]) for s in range(0, len(todo), step)])
        t2 = time.perf_counter() - t
        print(f"{enc!r}")
        print(f"texts {len(todo)} chunk {step}: identical {np.array_equal(one, parts)}, "
              f"max |diff| {np.abs(one - parts).max():.3g}, float16 identical "
              f"{np.array_equal(one.astype('<f2'), parts.astype('<f2'))}; "
              f"one call {t1:.1f} s, chunks {t2:.1f} s")


if __name__ == "__main__":
    main()
