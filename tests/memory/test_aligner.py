"""ArcAligner: masked LoRA, gated slot loops, attach/detach, generate, STE gradients.

A tiny random Llama (4 layers, GQA) built here: no tokenizer or real weights needed.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from engine.memory.aligner import ArcAligner
from engine.memory.gated_layer import ArcLayer
from engine.memory.slot_lora import MaskedLoRALinear, SlotContext

VOCAB, D, N_LAYERS = 96, 32, 4


@pytest.fixture(scope="module")
def model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=D, intermediate_size=64,
                         num_hidden_layers=N_LAYERS, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256, tie_word_embeddings=True)
    m = LlamaForCausalLM(config).eval().requires_grad_(False)
    m.generation_config.eos_token_id = None
    m.generation_config.pad_token_id = 0
    return m


def make_aligner(model, seed=1, random_lora=True, gate_bias=None, random_gate=False, **kw):
    torch.manual_seed(seed)
    aligner = ArcAligner.for_model(model, gated_layers=kw.pop("gated_layers", (1, 2)), **kw)
    with torch.no_grad():
        if random_lora:
            for ad in aligner.lora.values():
                ad.lora_B.normal_(0, 0.5)
        for gate in aligner.gates.values():
            if random_gate:
                gate.mlp[-1].weight.normal_(0, 3.0)
            if gate_bias is not None:
                gate.mlp[-1].bias.fill_(gate_bias)
    return aligner


def prompt(model, B=2, S=10, seed=3):
    """inputs_embeds [B, S, D] (slots then tokens), attention mask, slot mask at 1..3."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (B, S), generator=g)
    embeds = model.get_input_embeddings()(ids)
    slot_mask = torch.zeros(B, S, dtype=torch.bool)
    slot_mask[:, 1:4] = True
    embeds = embeds + slot_mask.unsqueeze(-1) * torch.randn(B, S, D, generator=g) * 0.02
    return embeds, torch.ones(B, S, dtype=torch.long), slot_mask


# ----------------------------------------------------------------------------- MaskedLoRALinear

def test_masked_lora_only_touches_masked_rows():
    torch.manual_seed(0)
    base = nn.Linear(16, 12).requires_grad_(False)
    ctx = SlotContext()
    lin = MaskedLoRALinear(base, rank=4, alpha=8, context=ctx)
    x = torch.randn(2, 7, 16)
    assert torch.equal(lin(x), base(x))  # no mask active
    assert torch.equal(lin.adapter(x), torch.zeros(2, 7, 12))  # B = 0 at init
    with torch.no_grad():
        lin.adapter.lora_B.normal_()
    mask = torch.zeros(2, 7, dtype=torch.bool)
    mask[0, 2] = mask[1, 5] = True
    with ctx.lora(mask):
        y = lin(x)
    assert torch.equal(y[~mask], base(x)[~mask])
    assert not torch.allclose(y[mask], base(x)[mask])
    assert lin.base is base  # shared, not copied


# ----------------------------------------------------------------------------- attach / detach

def test_disabled_aligner_is_the_plain_model_and_detach_restores(model):
    embeds, attn, slot_mask = prompt(model)
    originals = [m for m in model.modules()]
    plain = model(inputs_embeds=embeds, attention_mask=attn).logits
    aligner = make_aligner(model, gate_bias=6.0)
    aligner.lora_enabled = aligner.gate_enabled = False
    with aligner.attached(model):
        assert all(isinstance(l, ArcLayer) for l in model.model.layers)
        assert isinstance(model.model.layers[0].layer.self_attn.q_proj, MaskedLoRALinear)
        with aligner.slots(slot_mask):
            wrapped = model(inputs_embeds=embeds, attention_mask=attn).logits
    assert torch.equal(wrapped, plain)
    assert [m for m in model.modules()] == originals  # same modules, same order
    assert not any(isinstance(m, (ArcLayer, MaskedLoRALinear)) for m in model.modules())
    assert not any(k.startswith("model.layers.0.layer") for k in model.state_dict())
    # the aligner holds no copy of the base weights
    assert all(p.numel() < D * D for p in aligner.lora.parameters())


def test_lora_is_causal_and_zero_off_slots(model):
    embeds, attn, slot_mask = prompt(model)
    base_h = model(inputs_embeds=embeds, attention_mask=attn, output_hidden_states=True).hidden_states
    aligner = make_aligner(model)  # untrained gates: no loops
    seen = []

    def check(mod, args, out):
        x = args[0]
        rows = ~slot_mask if x.shape[1] == slot_mask.shape[1] else ~slot_mask[:, : x.shape[1]]
        assert torch.equal(out[rows], mod.base(x)[rows])
        seen.append(not torch.allclose(out[~rows], mod.base(x)[~rows]))

    with aligner.attached(model):
        hooks = [m.register_forward_hook(check) for m in model.modules() if isinstance(m, MaskedLoRALinear)]
        with aligner.slots(slot_mask):
            out = model(inputs_embeds=embeds, attention_mask=attn, output_hidden_states=True)
        for h in hooks:
            h.remove()
    assert len(seen) == N_LAYERS * 4 and all(seen)  # every wrapped Linear, delta at slot rows
    first = int(slot_mask[0].nonzero().min())
    for a, b in zip(out.hidden_states, base_h):
        assert torch.equal(a[:, :first], b[:, :first])  # before the first slot: the base model
    assert not torch.allclose(out.logits[:, first:], model(inputs_embeds=embeds).logits[:, first:])
    assert torch.equal(aligner.last_loops, torch.zeros(2, 3, 2, dtype=torch.long))


# ----------------------------------------------------------------------------- gate loops

@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(T=st.integers(1, 4), layout=st.lists(st.lists(st.booleans(), min_size=8, max_size=8),
                                           min_size=2, max_size=2),
       mode=st.sampled_from(["untrained", "always", "random"]), seed=st.integers(0, 5))
def test_loop_counts(model, T, layout, mode, seed):
    slot_mask = torch.tensor(layout)
    slot_mask[:, -2:] = False  # the question comes after the slots
    embeds, attn, _ = prompt(model, S=8, seed=seed)
    opts = {"untrained": {}, "always": {"gate_bias": 6.0}, "random": {"random_gate": True, "gate_bias": 0.0}}
    aligner = make_aligner(model, seed=seed, max_loops=T, **opts[mode])
    with aligner.attached(model), aligner.slots(slot_mask):
        model(inputs_embeds=embeds, attention_mask=attn)
    loops = aligner.last_loops
    n = int(slot_mask.sum(1).max())
    assert loops.shape == (2, n, 2)
    assert ((loops >= 0) & (loops <= T)).all()
    counts = slot_mask.sum(1)
    for b in range(2):
        real = loops[b, : counts[b]]
        assert (loops[b, counts[b]:] == 0).all()
        if mode == "untrained":
            assert (real == 0).all()
        elif mode == "always":
            assert (real == T).all()


def test_prefix_rerun_equals_full_rerun(model):
    embeds, attn, slot_mask = prompt(model)
    attn[1, :2] = 0  # left padding in row 1: a real 4-D mask gets sliced
    slot_mask[1] = False
    slot_mask[1, 3:5] = True
    outs, loops = [], []
    for prefix in (True, False):
        aligner = make_aligner(model, random_gate=True, gate_bias=0.5)
        aligner.prefix_rerun = prefix
        with aligner.attached(model), aligner.slots(slot_mask):
            outs.append(model(inputs_embeds=embeds, attention_mask=attn).logits)
        loops.append(aligner.last_loops)
    assert loops[0].sum() > 0 and torch.equal(loops[0], loops[1])
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- generate

def greedy_no_cache(model, aligner, embeds, attn, slot_mask, n):
    tokens = []
    for _ in range(n):
        S = embeds.shape[1]
        mask = torch.zeros(embeds.shape[0], S, dtype=torch.bool)
        mask[:, : slot_mask.shape[1]] = slot_mask
        with aligner.slots(mask):
            logits = model(inputs_embeds=embeds, attention_mask=torch.ones_like(mask, dtype=torch.long),
                           use_cache=False).logits[:, -1]
        tok = logits.argmax(-1)  # [B]
        tokens.append(tok)
        embeds = torch.cat([embeds, model.get_input_embeddings()(tok)[:, None]], 1)
    return torch.stack(tokens, 1)


def test_generate_with_loops_matches_no_cache_greedy(model):
    embeds, attn, slot_mask = prompt(model)
    aligner = make_aligner(model, random_gate=True, gate_bias=1.0)
    with aligner.attached(model):
        with aligner.slots(slot_mask):
            out = model.generate(inputs_embeds=embeds, attention_mask=attn, max_new_tokens=5, do_sample=False)
        loops = aligner.last_loops
        manual = greedy_no_cache(model, aligner, embeds, attn, slot_mask, 5)
    assert loops.sum() > 0 and loops.shape == (2, 3, 2)
    assert torch.equal(out, manual)


def test_generate_disabled_equals_plain_generate(model):
    embeds, attn, slot_mask = prompt(model)
    plain = model.generate(inputs_embeds=embeds, attention_mask=attn, max_new_tokens=5, do_sample=False)
    aligner = make_aligner(model, gate_bias=6.0)
    aligner.lora_enabled = aligner.gate_enabled = False
    with aligner.attached(model), aligner.slots(slot_mask):
        out = model.generate(inputs_embeds=embeds, attention_mask=attn, max_new_tokens=5, do_sample=False)
    assert torch.equal(out, plain)


# ----------------------------------------------------------------------------- training

def test_ste_gradients_reach_gates_and_lora_not_base(model):
    embeds, attn, slot_mask = prompt(model)
    aligner = make_aligner(model, random_gate=True, gate_bias=0.0)
    aligner.training_mode = True
    with aligner.attached(model), aligner.slots(slot_mask):
        logits = model(inputs_embeds=embeds, attention_mask=attn).logits
    logits.float().logsumexp(-1).mean().backward()
    assert aligner.last_loops.sum() > 0
    for name, p in list(aligner.gates.named_parameters()) + list(aligner.lora.named_parameters()):
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert all(p.grad is None for p in model.parameters())


def test_untrained_gate_gets_gradient_without_looping(model):
    embeds, attn, slot_mask = prompt(model)
    aligner = make_aligner(model)
    aligner.train()
    with aligner.attached(model), aligner.slots(slot_mask):
        logits = model(inputs_embeds=embeds, attention_mask=attn).logits
    logits.float().logsumexp(-1).mean().backward()
    assert aligner.last_loops.sum() == 0
    for gate in aligner.gates.values():
        assert gate.mlp[-1].bias.grad.abs() > 0  # straight-through: it can learn to loop


def test_projector_maps_memories_to_embedding_scale(model):
    aligner = ArcAligner.for_model(model, d_memory=48)
    memories = torch.randn(5, 48) * 30  # a final hidden state: norm in the hundreds
    slots = aligner.project(memories)
    emb_norm = model.get_input_embeddings().weight.norm(dim=-1).mean()
    assert slots.shape == (5, D) and slots.dtype == torch.float32
    torch.testing.assert_close(slots.norm(dim=-1), emb_norm.expand(5), rtol=0.35, atol=0)
    assert aligner.gated_layers == (2,)  # default: every other layer of the upper half
    square = ArcAligner.for_model(model)  # W = identity: exactly the embedding norm
    torch.testing.assert_close(square.project(memories[:, :D]).norm(dim=-1), emb_norm.expand(5))


def test_attach_twice_and_stale_cache_are_refused(model):
    from transformers import DynamicCache

    embeds, attn, slot_mask = prompt(model)
    aligner = make_aligner(model)
    with aligner.attached(model):
        with pytest.raises(RuntimeError):
            aligner.attach(model)
        cache = DynamicCache(config=model.config)
        model(inputs_embeds=embeds, attention_mask=attn, past_key_values=cache, use_cache=True)
        with aligner.slots(slot_mask), pytest.raises(RuntimeError, match="fresh prefill"):
            model(inputs_embeds=embeds, past_key_values=cache, use_cache=True)
    assert not any(isinstance(m, ArcLayer) for m in model.modules())
