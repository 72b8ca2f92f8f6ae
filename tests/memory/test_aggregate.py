"""Tests for engine/aggregate.py (H2MT appendix B policies and HiCI 3.3 multi-view pooling)."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from engine.memory.aggregate import (POLICIES, MultiViewAgg, make_aggregator, masked_mean,
                                     pad_children)

D = 16
# Small sizes keep the tests fast; the defaults (d_h=64, d_s=32, d_b=64) are exercised once below.
OPTS = {
    "mean": {},
    "self_attn": {"d_head": 8},
    "cross_attn": {"d_head": 8, "n_queries": 3},
    "gat": {"d_head": 8, "n_queries": 3, "tau": 0.7},
    "parent_attn": {"d_head": 8},
    "multiview": {"d_s": 8, "d_b": 16, "n_queries": 3, "n_heads": 4},
}


def build(name: str, seed: int = 0, perturb: bool = False):
    torch.manual_seed(seed)
    agg = make_aggregator(name, D, **OPTS[name])
    if perturb:  # move away from the mean-producing init
        with torch.no_grad():
            for p in agg.parameters():
                p.normal_(0.0, 0.5)
    return agg


_PERTURBED = {name: build(name, seed=1, perturb=True) for name in POLICIES}


def children_batch(counts, seed=0):
    g = torch.Generator().manual_seed(seed)
    return pad_children([torch.randn(c, D, generator=g) for c in counts])


@pytest.mark.parametrize("name", POLICIES)
def test_shape_dtype_and_defaults(name):
    x, mask = children_batch([3, 1, 5])
    out = make_aggregator(name, D)(x, mask)  # default options
    assert out.shape == (3, D) and out.dtype == torch.float32
    for dtype in (torch.float64, torch.bfloat16):
        assert _PERTURBED[name](x.to(dtype), mask).dtype == dtype
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", POLICIES)
@pytest.mark.parametrize("perturb", [False, True])
def test_padding_has_no_effect(name, perturb):
    agg = _PERTURBED[name] if perturb else build(name)
    counts = [4, 1, 6, 2]
    x, mask = children_batch(counts, seed=3)
    junk = torch.tensor([1e6, -1e6, float("nan"), float("inf")]).repeat(D * 6 // 4)[: D * 6]
    x = torch.where(mask.unsqueeze(-1), x, junk.view(1, 6, D).expand_as(x))
    batched = agg(x, mask)
    for b, c in enumerate(counts):
        alone = agg(x[b : b + 1, :c], mask[b : b + 1, :c])
        torch.testing.assert_close(batched[b : b + 1], alone, atol=1e-5, rtol=1e-5)
    assert torch.isfinite(batched).all()


@pytest.mark.parametrize("name", POLICIES)
def test_init_is_masked_mean(name):
    agg = build(name, seed=5)
    x, mask = children_batch([3, 1, 7, 2], seed=5)
    torch.testing.assert_close(agg(x, mask), masked_mean(x, mask), atol=1e-5, rtol=1e-5)
    # also for larger-magnitude inputs in reduced precision
    xb = (10 * x).bfloat16()
    ref = masked_mean(xb.float(), mask)
    torch.testing.assert_close(agg(xb, mask).float(), ref, atol=0.1, rtol=1e-2)


def test_multiview_init_is_exactly_mean():
    agg = build("multiview", seed=2)
    x, mask = children_batch([2, 5], seed=2)
    assert torch.equal(agg(x, mask), masked_mean(x, mask))


@settings(max_examples=15, deadline=None)
@given(data=st.data(), name=st.sampled_from(POLICIES), count=st.integers(1, 7))
def test_permutation_invariance(data, name, count):
    agg = _PERTURBED[name]
    seed = data.draw(st.integers(0, 2**16))
    x = torch.randn(count, D, generator=torch.Generator().manual_seed(seed))
    perm = data.draw(st.permutations(list(range(count))))
    mask = torch.ones(1, count, dtype=torch.bool)
    a = agg(x.unsqueeze(0), mask)
    b = agg(x[perm].unsqueeze(0), mask)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", [n for n in POLICIES if n != "mean"])
def test_gradients_reach_every_parameter(name):
    agg = build(name, seed=7, perturb=True)
    x, mask = children_batch([6, 3], seed=7)
    x.requires_grad_(True)
    w = torch.randn(2, D, generator=torch.Generator().manual_seed(8))
    (agg(x, mask) * w).sum().backward()
    for pname, p in agg.named_parameters():
        assert p.grad is not None, pname
        assert torch.isfinite(p.grad).all(), pname
        assert p.grad.abs().sum() > 0, pname
    assert x.grad[~mask].abs().sum() == 0  # padded slots get no gradient


def test_multiview_statistics_single_child():
    x = torch.randn(1, 1, D, requires_grad=True)
    mask = torch.ones(1, 1, dtype=torch.bool)
    z = MultiViewAgg.statistics(x, mask)
    assert torch.equal(z[0, 3], torch.zeros(D))  # std of one child is 0
    assert torch.equal(z[0, 1], x[0, 0]) and torch.equal(z[0, 2], x[0, 0])
    agg = build("multiview", seed=3, perturb=True)
    agg(x, mask).sum().backward()
    assert torch.isfinite(x.grad).all()


def test_multiview_statistics_ignore_padding():
    x, mask = pad_children([torch.tensor([[1.0, -2.0], [3.0, 4.0]]), torch.tensor([[5.0, 6.0]])])
    z = MultiViewAgg.statistics(x, mask)
    torch.testing.assert_close(z[0, :4], torch.tensor([[2.0, 1.0], [3.0, 4.0], [1.0, -2.0], [1.0, 3.0]]))
    torch.testing.assert_close(z[1, :4], torch.tensor([[5.0, 6.0], [5.0, 6.0], [5.0, 6.0], [0.0, 0.0]]))


def test_pad_children():
    a, b = torch.randn(2, D), torch.randn(4, D)
    x, mask = pad_children([a, b])
    assert x.shape == (2, 4, D) and mask.tolist() == [[True, True, False, False], [True] * 4]
    assert torch.equal(x[0, :2], a) and torch.equal(x[1], b) and not x[0, 2:].any()
    with pytest.raises(ValueError):
        pad_children([])
    with pytest.raises(ValueError):
        pad_children([a, torch.randn(0, D)])
    with pytest.raises(ValueError):
        pad_children([a, torch.randn(2, D + 1)])


def test_parent_without_children_is_rejected():
    x = torch.randn(2, 3, D)
    mask = torch.tensor([[True, False, False], [False, False, False]])
    with pytest.raises(AssertionError):
        make_aggregator("mean", D)(x, mask)


def test_unknown_policy():
    with pytest.raises(ValueError) as err:
        make_aggregator("median", D)
    for name in POLICIES:
        assert name in str(err.value)


def test_parent_attn_literal_variant_includes_parent_slot():
    # attend_self=True follows the paper literally: m_par = 0 at init takes a 1/(1+c) share
    torch.manual_seed(0)
    agg = make_aggregator("parent_attn", D, d_head=8, attend_self=True)
    x, mask = children_batch([3, 1], seed=4)
    c = mask.sum(1, keepdim=True).float()
    torch.testing.assert_close(agg(x, mask), masked_mean(x, mask) * c / (1 + c), atol=1e-5, rtol=1e-5)
