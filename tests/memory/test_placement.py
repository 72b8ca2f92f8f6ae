"""Device placement (``engine.memory.placement``): the parts on one device, the stored memories
and the routing evidence on the host, meeting only through ``onto`` and ``to_host``.

A CPU-only machine has no second device to mix with (and torch's "meta" device lets a host
tensor meet a meta weight without an error), so ``SecondDevice`` simulates one: the router's
parameters, and whatever is computed from them, are "on the device"; ``placement.onto`` puts a
tensor there and ``placement.to_host`` brings one back. An operation that mixes a device tensor
with a host tensor (0-dim scalars excepted, as CUDA allows), or numpy reading a device tensor,
raises the error CUDA raises. An ask then fails wherever the stored memories or the query meet
the router's parts without ``placement`` (today's code on CUDA: routing_tree.memory_keys)."""
from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakIdKeyDictionary

from engine.answer.modes import MODES
from engine.ask import AskOptions, ask
from engine.memory import placement
from tests.support.runtime import widgets_runtime

MIXED = "Expected all tensors to be on the same device (simulated second device)"


class SecondDevice(TorchDispatchMode):
    """Tensors tagged as living on a second device; tags follow every result computed from one."""

    def __init__(self):
        super().__init__()
        self.on = WeakIdKeyDictionary()

    def put(self, t: torch.Tensor) -> torch.Tensor:
        self.on[t] = True
        return t

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        there = [t for t in tensors if t in self.on]
        here = [t for t in tensors if t not in self.on and t.dim() > 0]
        if there and here and func not in (torch.ops.aten.copy_.default,):
            raise RuntimeError(f"{MIXED}: {func}")
        out = func(*args, **kwargs)
        if there and func is not torch.ops.aten.copy_.default:
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    self.on[t] = True
        return out


class NoNumpyOnDevice(TorchFunctionMode):
    def __init__(self, device: SecondDevice):
        super().__init__()
        self.device = device

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.numpy and args and args[0] in self.device.on:
            raise TypeError("can't convert a device tensor to numpy (simulated second device)")
        return func(*args, **(kwargs or {}))


@pytest.fixture
def router_on_second_device(tiny_backbone, tmp_path, monkeypatch):
    rt, doc = widgets_runtime(tiny_backbone, tmp_path)
    device = SecondDevice()
    for p in rt.parts.router.parameters():
        device.put(p)
    real_to_host = placement.to_host

    def onto(x, module):
        return device.put(x.detach().to(dtype=next(module.parameters()).dtype).clone())

    def to_host(x):
        with torch.utils._python_dispatch._disable_current_modes():
            return real_to_host(x).clone()  # a new tensor, computed outside the mode: untagged

    monkeypatch.setattr(placement, "onto", onto)
    monkeypatch.setattr(placement, "to_host", to_host)
    with device, NoNumpyOnDevice(device):
        yield rt, doc


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_answers_with_the_router_parts_on_another_device(router_on_second_device,
                                                                     mode):
    rt, doc = router_on_second_device
    for router in ("fused", "memory"):
        out = ask(rt, doc, "How do I power a large widget?",
                  AskOptions(mode=mode, router=router, k=2, max_new_tokens=2)).as_json()
        assert out["quote"] is not None
        if mode != "full":
            scored = [r for r in out["route"] if r["channels"]]
            assert scored and all(r["channels"].get("memory") is not None for r in scored)


def test_a_mix_is_caught(router_on_second_device):
    """The harness: a host tensor meeting the router's weight directly raises, as on CUDA."""
    rt, _ = router_on_second_device
    with pytest.raises(RuntimeError, match="same device"):
        rt.parts.router.w_k(torch.zeros(3, rt.parts.d_model))
