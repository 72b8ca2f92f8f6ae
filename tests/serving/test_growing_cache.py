"""The generation worker's growing KV cache layer (engine.serving.growing_cache)."""
import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from engine.serving.growing_cache import ROOM, GrowingLayer, growing


def _kv(b: int, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, 3, n, 8, generator=g), torch.randn(b, 3, n, 8, generator=g)


def test_updates_past_its_room_hold_what_concatenation_holds():
    plain, grown = DynamicLayer(), GrowingLayer()
    for step, n in enumerate([40] + [1] * (ROOM + 5) + [ROOM + 3, 1]):
        k, v = _kv(2, n, step)
        want = plain.update(k, v)
        got = grown.update(k, v)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), step
    assert grown.get_seq_length() == plain.get_seq_length() == 40 + ROOM + 5 + ROOM + 3 + 1


def test_a_step_writes_in_place_until_the_room_is_used():
    cache = DynamicCache()
    cache.update(*_kv(2, 16, 0), layer_idx=0)
    layer = growing(cache).layers[0]
    assert isinstance(layer, GrowingLayer)
    start = layer.keys.data_ptr()
    for step in range(ROOM):
        layer.update(*_kv(2, 1, step + 1))
        assert layer.keys.data_ptr() == start, f"step {step} copied the cache"
    layer.update(*_kv(2, 1, 999))
    assert layer.get_seq_length() == 16 + ROOM + 1  # it grew, keeping every position


def test_keys_and_values_replaced_one_after_the_other_keep_their_own_lengths():
    """A leave cuts shared padding: keys are assigned first, then values are read and cut."""
    layer = GrowingLayer()
    layer.update(*_kv(3, 10, 0))
    k, v = layer.keys, layer.values
    layer.keys = layer.keys[[0, 2], :, 4:]
    layer.values = layer.values[[0, 2], :, 4:]
    assert torch.equal(layer.keys, k[[0, 2], :, 4:]) and torch.equal(layer.values, v[[0, 2], :, 4:])
