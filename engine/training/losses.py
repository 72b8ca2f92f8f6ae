"""Training objectives of H2MT (section 3.4): L_route, L_sel, L_LM, L_AE, L_gen.

Pure functions over tensors; the training loop (data, schedules, checkpoints) lives elsewhere.
The backbone is frozen (its parameters have requires_grad False); gradients flow only into what
the caller passes in with requires_grad (memory slots built from e_write/e_read/Agg, routing
scores from W_q/W_k, the ArcAligner parts).

Routing losses take per-parent padded score matrices: ``scores`` [P, C] for P routed parents
with at most C children, ``mask`` [P, C] True where a child exists. Log-probabilities come from
one log-softmax of s/tau (never a softmax followed by a cross-entropy: DESIGN's pitfall).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def routing_log_probs(scores: torch.Tensor, mask: torch.Tensor, tau: float = 1.0) -> torch.Tensor:
    """log pi_p(u) = log softmax_{u in C(p)} (s_p(u) / tau), -inf at padding (H2MT 3.4)."""
    assert scores.shape == mask.shape and mask.any(-1).all(), "every parent needs a child"
    return torch.log_softmax((scores / tau).masked_fill(~mask, float("-inf")), dim=-1)


def route_losses(scores: torch.Tensor, mask: torch.Tensor, gold: torch.Tensor,
                 tau: float = 1.0) -> torch.Tensor:
    """[P]: -log pi_p(g(p)) per routed parent (the terms of L_route, for per-query weights)."""
    logp = routing_log_probs(scores, mask, tau)
    assert mask.gather(1, gold[:, None]).all(), "gold child must exist"
    return -logp.gather(1, gold[:, None])[:, 0]


def route_loss(scores: torch.Tensor, mask: torch.Tensor, gold: torch.Tensor,
               tau: float = 1.0) -> torch.Tensor:
    """L_route = -sum_p log pi_p(g(p)) over the routed parents of the gold path."""
    return route_losses(scores, mask, gold, tau).sum()


def selection_losses(scores: torch.Tensor, mask: torch.Tensor, gold_mask: torch.Tensor,
                     tau: float = 1.0) -> torch.Tensor:
    """[P]: -log sum_{u in G(p)} pi_p(u) per routed parent (the terms of L_sel)."""
    assert (gold_mask <= mask).all() and gold_mask.any(-1).all(), "gold sets must be non-empty children"
    logp = routing_log_probs(scores, mask, tau).masked_fill(~gold_mask, float("-inf"))
    return -torch.logsumexp(logp, dim=-1)


def selection_loss(scores: torch.Tensor, mask: torch.Tensor, gold_mask: torch.Tensor,
                   tau: float = 1.0) -> torch.Tensor:
    """L_sel = -sum_p log sum_{u in G(p)} pi_p(u): probability mass on the gold set."""
    return selection_losses(scores, mask, gold_mask, tau).sum()


def conditional_lm_loss(model, prefixes: list[torch.Tensor], targets: list[torch.Tensor],
                        embed, *, slot_masks: list[torch.Tensor] | None = None,
                        aligner=None) -> torch.Tensor:
    """Mean over sequences of -1/n sum_t log p(y_t | prefix, y_<t) (token-level cross-entropy).

    ``prefixes[i]``: [n_i, d] input embeddings (memory slots, prompt tokens); ``targets[i]``:
    [m_i] token ids, embedded with ``embed`` and predicted one position ahead. Sequences are
    right-padded with an attention mask, so each loss equals its unbatched value.

    With an ArcAligner and ``slot_masks[i]`` (bool [n_i], True at the memory-slot rows of
    prefix i), the forward runs with the aligner attached and those rows armed: its masked LoRA
    and, when enabled, its gate act on them (ArcAligner 3.5: every stage trains through this).
    """
    seqs, labels = [], []
    for pre, tgt in zip(prefixes, targets):
        tgt_emb = embed(tgt).to(pre.dtype)
        seqs.append(torch.cat([pre, tgt_emb]))
        labels.append(torch.cat([torch.full((len(pre),), -100, dtype=torch.long), tgt.cpu()]))
    width = max(len(s) for s in seqs)
    d = seqs[0].shape[-1]
    device = seqs[0].device
    x = torch.zeros(len(seqs), width, d, device=device, dtype=seqs[0].dtype)
    y = torch.full((len(seqs), width), -100, dtype=torch.long)
    attn = torch.zeros(len(seqs), width, dtype=torch.long, device=device)
    for i, (s, lab) in enumerate(zip(seqs, labels)):
        x[i, : len(s)] = s
        y[i, : len(lab)] = lab
        attn[i, : len(s)] = 1
    if aligner is not None and slot_masks is not None:
        armed = torch.zeros(len(seqs), width, dtype=torch.bool, device=device)
        for i, m in enumerate(slot_masks):
            armed[i, : len(m)] = m.to(device)
        with aligner.attached(model), aligner.slots(armed):
            logits = model(inputs_embeds=x, attention_mask=attn, use_cache=False).logits.float()
    else:
        logits = model(inputs_embeds=x, attention_mask=attn, use_cache=False).logits.float()
    y = y.to(logits.device)
    # position t predicts token t+1
    per_token = F.cross_entropy(logits[:, :-1].transpose(1, 2), y[:, 1:], ignore_index=-100,
                                reduction="none")  # [B, T-1]
    counts = (y[:, 1:] != -100).sum(-1).clamp_min(1)
    return (per_token.sum(-1) / counts).mean()


def memory_lm_loss(backbone, slots: torch.Tensor, texts: list[list[int]]) -> torch.Tensor:
    """L_LM (H2MT 3.4): each node's text modelled after its memory as an embedding prefix.

    ``slots`` [B, d] are the nodes' memories already mapped into the input space.
    """
    targets = [torch.tensor(t, dtype=torch.long, device=backbone.device) for t in texts]
    return conditional_lm_loss(backbone.model, [s[None] for s in slots], targets, backbone.embed)


def reconstruction_loss(backbone, slots: torch.Tensor, texts: list[list[int]],
                        prompt: str = "Repeat the section word for word:",
                        aligner=None) -> torch.Tensor:
    """L_AE: decode x_v from m_v under a reconstruction prompt: [slot; prompt] -> x_v.
    With ``aligner``, the slot row goes through its masked LoRA (ArcAligner stage I)."""
    prompt_ids = torch.tensor(backbone.encode(" " + prompt), dtype=torch.long, device=backbone.device)
    prompt_emb = backbone.embed(prompt_ids).to(slots.dtype)
    targets = [torch.tensor(t, dtype=torch.long, device=backbone.device) for t in texts]
    mask = torch.zeros(1 + len(prompt_ids), dtype=torch.bool)
    mask[0] = True
    return conditional_lm_loss(backbone.model, [torch.cat([s[None], prompt_emb]) for s in slots],
                               targets, backbone.embed, slot_masks=[mask] * len(slots),
                               aligner=aligner)


def answer_loss(backbone, prefixes: list[torch.Tensor], answers: list[str], *,
                slot_masks: list[torch.Tensor] | None = None, aligner=None) -> torch.Tensor:
    """L_gen: -1/A sum_t log p(a_t | q, M_ret, a_<t); ``prefixes`` are the prompts' embeddings
    (chat head, memory slots, question, assistant turn) as the memory mode builds them, with
    ``slot_masks`` marking the slot rows for the aligner (stages II and III)."""
    eos = backbone.tokenizer.eos_token_id
    targets = [torch.tensor(backbone.encode(a.strip()) + [eos], dtype=torch.long,
                            device=backbone.device) for a in answers]
    return conditional_lm_loss(backbone.model, prefixes, targets, backbone.embed,
                               slot_masks=slot_masks, aligner=aligner)
