"""A decoding batch's KV cache with room to grow: a step writes its token in place.

Transformers' ``DynamicLayer`` grows by ``torch.cat`` at every step: each layer's whole cache
([B, H, L, D], keys and values) is copied for one new position. With eight sequences of a
thousand positions that copy, and the fresh allocation under it, was over a third of a step on
this CPU (``bench/decode_step.py``). ``GrowingLayer`` keeps the keys and values in a buffer
with ``ROOM`` spare positions and hands attention a view of the filled part; it grows by
``ROOM`` more when full, so the copy happens once every ``ROOM`` steps. The values are the
same: attention reads the same numbers through a strided view (tests/serving/test_worker.py
compares batched and unbatched tokens).

Why by hand: transformers' ``StaticCache`` preallocates the whole ``max_cache_len`` for every
row and has no way to add a sequence to a running batch or to cut shared padding
(``engine.serving.batch``); this layer is a ``DynamicLayer`` whose tensors may be replaced
whole (a join, a leave) as before.
"""
from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

# Spare positions a layer's buffer keeps: one reallocation per ROOM decoding steps.
ROOM = 128


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` over buffers with spare room (module docstring). ``keys``/``values``
    read as the filled part; assigning them (a join or a leave) replaces the buffers."""

    def __init__(self) -> None:
        self._k = self._v = None
        self._nk = self._nv = 0  # filled positions of each (a join assigns one, then the other)
        super().__init__()

    @property
    def keys(self) -> torch.Tensor | None:
        return self._k if self._k is None or self._k.dim() != 4 else self._k[:, :, :self._nk]

    @keys.setter
    def keys(self, value: torch.Tensor | None) -> None:
        self._k, self._nk = self._roomy(value)

    @property
    def values(self) -> torch.Tensor | None:
        return self._v if self._v is None or self._v.dim() != 4 else self._v[:, :, :self._nv]

    @values.setter
    def values(self, value: torch.Tensor | None) -> None:
        self._v, self._nv = self._roomy(value)

    @staticmethod
    def _roomy(t: torch.Tensor | None, room: int = ROOM) -> tuple[torch.Tensor | None, int]:
        """A buffer holding ``t`` with ``room`` spare positions, and how many it holds."""
        if t is None or t.dim() != 4:  # an empty placeholder (lazy initialisation)
            return t, 0
        b, h, n, d = t.shape
        buf = t.new_empty((b, h, n + room, d))
        buf[:, :, :n] = t
        return buf, n

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        if self._k is None or self._k.dim() != 4:  # empty: these are the first positions
            self.keys, self.values = key_states, value_states
            return self.keys, self.values
        n, t = self._nk, key_states.shape[-2]
        if n + t > self._k.shape[-2]:  # full: new buffers with room for these and ROOM more
            self._k, _ = self._roomy(self.keys, t + ROOM)
            self._v, _ = self._roomy(self.values, t + ROOM)
        self._k[:, :, n:n + t] = key_states
        self._v[:, :, n:n + t] = value_states
        self._nk = self._nv = n + t
        return self.keys, self.values


def growing(cache: DynamicCache) -> DynamicCache:
    """The same cache, its layers turned into ``GrowingLayer``s (their tensors kept)."""
    layers = []
    for old in cache.layers:
        if type(old) is not DynamicLayer:  # a sliding-window or other layer: left as it is
            layers.append(old)
            continue
        new = GrowingLayer()
        new.is_initialized = old.is_initialized
        if old.is_initialized:
            new.dtype, new.device = old.dtype, old.device
        new.keys, new.values = old.keys, old.values
        layers.append(new)
    cache.layers = layers
    return cache
