"""H2MT 3.4 objectives on tiny inputs: values, masks, and where gradients go."""
from __future__ import annotations

import math

import pytest
import torch

from engine.training.losses import (answer_loss, conditional_lm_loss, memory_lm_loss,
                                    reconstruction_loss, route_loss, route_losses,
                                    routing_log_probs, selection_loss, selection_losses)
from engine.memory.parts import H2MTParts
from engine.memory.writer import _Item, read_out_differentiable


def test_route_loss_is_cross_entropy_of_the_gold_child():
    scores = torch.tensor([[1.0, 2.0, 0.0], [0.5, -1.0, 9.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])  # 2nd parent: 2 children
    gold = torch.tensor([1, 0])
    tau = 0.5
    want = -(math.log(math.exp(4) / (math.exp(2) + math.exp(4) + 1))
             + math.log(math.exp(1) / (math.exp(1) + math.exp(-2))))
    assert route_loss(scores, mask, gold, tau).item() == pytest.approx(want, rel=1e-6)


def test_selection_loss_is_gold_mass_and_ignores_padding():
    scores = torch.tensor([[0.0, 0.0, 0.0, 100.0]])
    mask = torch.tensor([[True, True, True, False]])
    gold = torch.tensor([[True, True, False, False]])
    assert selection_loss(scores, mask, gold).item() == pytest.approx(-math.log(2 / 3), rel=1e-6)
    # a single-child gold set equals the route loss
    g1 = torch.tensor([[False, True, False, False]])
    assert selection_loss(scores, mask, g1).item() == pytest.approx(
        route_loss(scores, mask, torch.tensor([1])).item())
    lp = routing_log_probs(scores, mask)
    assert lp[0, 3] == float("-inf") and torch.logsumexp(lp[0], 0).item() == pytest.approx(0, abs=1e-6)


def test_per_parent_terms_sum_to_the_losses():
    """route_losses / selection_losses: one term per parent (for per-query weights), whose sums
    are L_route and L_sel."""
    scores = torch.tensor([[1.0, 2.0, 0.0], [0.5, -1.0, 9.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    gold = torch.tensor([1, 0])
    per = route_losses(scores, mask, gold, 0.5)
    assert per.shape == (2,)
    assert per[1].item() == pytest.approx(-math.log(math.exp(1) / (math.exp(1) + math.exp(-2))))
    assert per.sum().item() == pytest.approx(route_loss(scores, mask, gold, 0.5).item())
    gold_mask = torch.tensor([[True, True, False], [False, True, False]])
    sel = selection_losses(scores, mask, gold_mask)
    assert sel.shape == (2,)
    assert sel.sum().item() == pytest.approx(selection_loss(scores, mask, gold_mask).item())
    assert sel[1].item() == pytest.approx(-math.log(math.exp(-1) / (math.exp(0.5) + math.exp(-1))))


def test_routing_losses_train_only_the_router(tiny_backbone):
    parts = H2MTParts(tiny_backbone.hidden_size, "mean")
    q, m = torch.randn(tiny_backbone.hidden_size), torch.randn(4, tiny_backbone.hidden_size)
    s = parts.router.score(q, m)[None]
    route_loss(s, torch.ones_like(s, dtype=torch.bool), torch.tensor([2])).backward()
    assert parts.router.w_q.weight.grad.abs().sum() > 0 and parts.router.w_k.weight.grad.abs().sum() > 0
    assert parts.e_write.grad is None


def test_conditional_lm_loss_matches_a_manual_cross_entropy(tiny_backbone):
    bb = tiny_backbone
    prefix = torch.randn(2, bb.hidden_size)
    tgt = torch.tensor(bb.encode("hello widget world"))
    loss = conditional_lm_loss(bb.model, [prefix], [tgt], bb.embed)
    x = torch.cat([prefix, bb.embed(tgt)])[None]
    logits = bb.model(inputs_embeds=x).logits[0]
    logp = torch.log_softmax(logits, -1)
    want = -torch.stack([logp[len(prefix) - 1 + t, tgt[t]] for t in range(len(tgt))]).mean()
    torch.testing.assert_close(loss, want, rtol=1e-5, atol=1e-5)
    # right-padded batching: the batch loss is the mean of the unbatched losses
    other = torch.tensor(bb.encode("a much longer target sentence about large widgets and power"))
    prefix2 = torch.randn(3, bb.hidden_size)
    both = conditional_lm_loss(bb.model, [prefix, prefix2], [tgt, other], bb.embed)
    alone2 = conditional_lm_loss(bb.model, [prefix2], [other], bb.embed)
    torch.testing.assert_close(both, (loss + alone2) / 2, rtol=1e-4, atol=1e-4)


def test_memory_losses_reach_only_the_trainable_parts(tiny_backbone):
    """L_LM, L_AE and L_gen backpropagate into e_write/e_read (through the writer) and the
    ArcAligner projector, never into the frozen backbone."""
    bb = tiny_backbone
    parts = H2MTParts(bb.hidden_size, "mean").init_from_backbone(bb)
    texts = [bb.encode("Small widgets fit in one hand."), bb.encode("Large widgets need 12 V.")]
    mem = read_out_differentiable(bb, parts, [_Item(i, t, None) for i, t in enumerate(texts)])
    slots = parts.aligner.project(mem)
    question = bb.embed(torch.tensor(bb.encode("Which widgets need power?")))
    loss = (memory_lm_loss(bb, slots, texts) + 0.5 * reconstruction_loss(bb, slots, texts)
            + answer_loss(bb, [torch.cat([slots, question])], ["Large widgets."]))
    loss.backward()
    assert torch.isfinite(loss)
    assert parts.e_write.grad is not None and parts.e_write.grad.abs().sum() > 0
    assert parts.e_read.grad.abs().sum() > 0
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in parts.aligner.projector.parameters())
    assert all(p.grad is None for p in bb.model.parameters())
