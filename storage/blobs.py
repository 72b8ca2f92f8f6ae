"""Memory vectors <-> bytes: raw little-endian values plus a dtype name and a dimension.

The only storage module that imports torch. Decoding gives back a tensor bit-for-bit equal to the
one encoded (NaN payloads and signed zeros included), because values are copied, never converted.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

# dtype name -> (torch dtype, little-endian numpy dtype of the raw bytes, torch dtype of those).
# bfloat16 has no numpy dtype: its bytes travel as int16 and are viewed back as bfloat16.
_CODECS: dict[str, tuple[torch.dtype, np.dtype, torch.dtype]] = {
    "float32": (torch.float32, np.dtype("<f4"), torch.float32),
    "float16": (torch.float16, np.dtype("<f2"), torch.float16),
    "bfloat16": (torch.bfloat16, np.dtype("<i2"), torch.int16),
    "float64": (torch.float64, np.dtype("<f8"), torch.float64),
}
_NAME_OF = {codec[0]: name for name, codec in _CODECS.items()}

SUPPORTED_DTYPES = tuple(_CODECS)


class CorruptBlob(ValueError):
    """A stored memory whose bytes do not match its dtype and dimension."""


@dataclass(frozen=True)
class EncodedVector:
    dtype: str  # one of SUPPORTED_DTYPES
    dim: int
    blob: bytes


def encode_vector(vector: torch.Tensor) -> EncodedVector:
    """One 1-D memory vector as raw little-endian bytes (on CPU, detached, contiguous)."""
    if not isinstance(vector, torch.Tensor):
        raise TypeError(f"a memory must be a torch.Tensor, got {type(vector).__name__}")
    if vector.dim() != 1:
        raise ValueError(f"a memory must be a 1-D vector, got shape {tuple(vector.shape)}")
    name = _NAME_OF.get(vector.dtype)
    if name is None:
        raise TypeError(f"memory dtype {vector.dtype} is not one of {SUPPORTED_DTYPES}")
    _, np_dtype, raw_dtype = _CODECS[name]
    raw = vector.detach().cpu().contiguous().view(raw_dtype).numpy()
    return EncodedVector(name, int(vector.shape[0]), raw.astype(np_dtype, copy=False).tobytes())


def decode_vector(dtype: str, dim: int, blob: bytes) -> torch.Tensor:
    """The CPU tensor that ``encode_vector`` turned into ``blob``."""
    if dtype not in _CODECS:
        raise CorruptBlob(f"unknown memory dtype {dtype!r} (supported: {SUPPORTED_DTYPES})")
    torch_dtype, np_dtype, raw_dtype = _CODECS[dtype]
    if len(blob) != dim * np_dtype.itemsize:
        raise CorruptBlob(f"memory blob has {len(blob)} bytes, expected {dim} x {dtype}")
    raw = np.frombuffer(blob, dtype=np_dtype).astype(np_dtype.newbyteorder("="))  # a writable copy
    return torch.from_numpy(raw).view(torch_dtype)


def encode_array(vector: np.ndarray, dtype: str = "float16") -> EncodedVector:
    """A 1-D numpy vector (routing evidence) as raw little-endian bytes of ``dtype``."""
    _, np_dtype, _ = _CODECS[dtype]
    arr = np.asarray(vector).reshape(-1).astype(np_dtype)
    return EncodedVector(dtype, int(arr.shape[0]), arr.tobytes())


def decode_array(dtype: str, dim: int, blob: bytes) -> np.ndarray:
    """The float32 numpy vector of an ``encode_array`` blob."""
    if dtype == "bfloat16":
        return decode_vector(dtype, dim, blob).float().numpy()
    _, np_dtype, _ = _CODECS[dtype]
    arr = np.frombuffer(blob, dtype=np_dtype)
    if arr.shape[0] != dim:
        raise CorruptBlob(f"evidence vector of {arr.shape[0]} values, expected {dim}")
    return arr.astype(np.float32)
