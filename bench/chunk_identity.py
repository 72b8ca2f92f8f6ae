"""Passage vectors encoded in chunks, as ``unit_vectors.precompute`` cuts them, against one call.

    OMP_NUM_THREADS=1 python -m bench.chunk_identity FILE CHUNK

Prints whether the float32 vectors (and their float16 as stored) are identical."""
import sys, tempfile, time
from pathlib import Path
import numpy as np
from engine.answer.passages import unit_vectors as uv
from engine.answer.passages.passage_index import index_for
from engine.ingest import ingest_file
from engine.runtime import Runtime
from engine.settings import Settings

with tempfile.TemporaryDirectory() as tmp:
    rt = Runtime.load(Settings(data_dir=Path(tmp), cache_dir=Settings().cache_dir))
    doc = ingest_file(Path(sys.argv[1]), rt, memories=False, unit_vectors=False).doc_id
    index = index_for(rt.cache, doc, rt.library.get_document(doc).sha256, rt.library.get_tree(doc))
    todo = uv.pending_texts(rt, doc, index, uv.WINDOWS)
    enc = rt.encoder
    t = time.perf_counter(); one = enc.encode(todo); t1 = time.perf_counter() - t
    step = int(sys.argv[2])
    t = time.perf_counter()
    parts = np.concatenate([enc.encode(todo[s:s + step]) for s in range(0, len(todo), step)])
    t2 = time.perf_counter() - t
    print(f"texts {len(todo)} chunk {step}: identical {np.array_equal(one, parts)}, "
          f"max |diff| {np.abs(one - parts).max():.3g}, float16 identical "
          f"{np.array_equal(one.astype('<f2'), parts.astype('<f2'))}; one call {t1:.1f} s, chunks {t2:.1f} s")
