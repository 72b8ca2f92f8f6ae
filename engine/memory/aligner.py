"""ArcAligner: memory slots refined inside the frozen backbone (ArcAligner 3.2-3.4, Algorithm 1).

Node memories enter the causal LM as "memory slots": input-embedding rows placed before the
question. Three trainable parts act on them, and only on them:

- ``projector`` W_psi (eq. 1-2): memory space -> input-embedding space.
- selective LoRA (eq. 3): A(H) = F(H) + M_r * dF(H). A low-rank update on the attention
  projections (q/k/v/o by default) of every decoder layer, added only at slot rows.
- slot-wise gates (eq. 5-9) at the gated layers: after the layer's normal pass, up to T more
  applications of A to the slot rows, each one only where the gate says so. Training uses the
  straight-through gate (eq. 7), inference the hard gate. Non-slot rows keep the normal pass's
  output (eq. 9). A slot whose gate says stop stops for good; its loop count is the number of
  steps with g = 1 before the first 0.

How this meets the backbone (transformers' Llama layers in the pinned version):

- ``attach(model)`` swaps each target ``nn.Linear`` for a ``MaskedLoRALinear`` around the very
  same Linear (frozen, shared, never copied) and each decoder layer for an ``ArcLayer`` around
  the original layer; ``detach`` puts the original modules back. ``ArcLayer.forward`` takes
  ``(hidden_states, *args, **kwargs)`` and passes them untouched to the original layer (recent
  transformers pass precomputed rotary embeddings and more as kwargs, and the layer returns a
  tensor where older versions returned a tuple: both are handled).
- ``with aligner.slots(slot_mask)`` arms the slots for one forward: the first model forward whose
  sequence length equals the mask's (the prefill inside ``generate``). Decode steps (length 1)
  and any later forward pass through with no LoRA and no gate.

Threads. The slot context (armed mask, LoRA mask, loop counts) is thread-local: slots armed in
one thread are seen only by forwards run in that thread. ``with aligner.attached(model)`` is
reference-counted and thread-safe: several threads may generate with slots at once, and forwards
of other threads (the memory writer, text answers) go through the wrappers unchanged (no armed
mask in their thread: exactly the original modules). The wrappers stay installed until the last
user leaves.

KV cache. The normal (mandatory) pass of a gated layer is the layer's ordinary call: it writes the
cache. The extra gate loops must not (a second call with a live cache appends to that layer's
cache), so they run with ``past_key_values=None, use_cache=False`` and the same rotary embeddings
and attention mask. The K/V cached at a gated layer are therefore the mandatory pass's, computed
from that layer's input, which the loops do not change; the refined slot states are the layer's
output and feed the next layer (whose cache is computed from them). This is exactly what a forward
without any cache computes, so cached generation equals a no-cache greedy loop.

Prefix re-run. Each extra loop re-runs the layer only on the prefix up to the last slot position
(batch-wide). In a causal model rows before P depend only on rows before P, so this is exact; the
rotary embeddings, position ids and a 4-D attention mask are sliced to the prefix. Any layer
argument this code does not know how to slice makes it fall back to re-running the whole sequence.

Query independence. Slots placed before the question cannot attend to it: their refinement and
loop counts do not depend on the question (and could be cached per node). Placing slots after the
question would change that.

Known limits. Slots need a fresh prefill (an empty cache); this is checked. With
``output_hidden_states=True`` the entry recorded for a gated layer is its mandatory-pass output
(the loops run through ``layer.forward`` and record nothing), while the next layer receives the
refined states. Gradient checkpointing is not supported while slots are active (the recompute
would run outside the slot context). No LoRA dropout.

Initialisation (untrained parts must leave the backbone's behaviour sane):
- projector: y = s * W (m / ||m||) + b with W = identity (rectangular identity if the sizes
  differ), b = 0 and s learned (log-parametrised), set by ``init_from_model`` to the mean norm of
  the backbone's token embeddings. A memory (a final hidden state after the last norm, norm ~
  tens) thus enters at the scale of a token embedding, along its own direction.
- LoRA: A Kaiming-uniform, B = 0 (standard LoRA), so an untrained LoRA is a no-op.
- gates: MLP(rmsnorm(h)) with a parameter-free RMS norm at the input (the residual stream's scale
  varies a lot across layers), last Linear weight 0 and bias -4: an untrained gate outputs
  sigmoid(-4) ~ 0.018 < 0.5 everywhere, so it never loops until trained, yet the straight-through
  estimator already passes gradients to its bias.
- default gated layers: every other layer of the upper half but the last,
  ``range(N // 2, N - 1, 2)``. The paper gates "a subset" without naming it; the lower layers
  still build token-level features, the last layer's slot outputs reach no other position, and
  this bounds the extra cost at T * floor(N / 4) prefix passes of one layer.

All parameters are float32; inputs are cast in and results cast back to the model's dtype.
"""
from __future__ import annotations

import math
import threading
import weakref
from contextlib import contextmanager
from typing import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
GATE_BIAS_INIT = -4.0


def default_gated_layers(n_layers: int) -> tuple[int, ...]:
    """Every other layer of the upper half, the last layer excluded: range(N // 2, N - 1, 2).

    The last layer is never gated: a slot row's output there feeds no later position (it only
    changes the slot's own next-token logits, which nothing reads), so its loops could not
    change an answer and its gate would get no gradient. A 2-layer model gates layer 0.
    """
    return tuple(range(n_layers // 2, n_layers - 1, 2)) or (max(0, n_layers - 2),)


# ----------------------------------------------------------------------------- shared context

class SlotContext(threading.local):
    """State shared by the wrappers of one attached aligner, one copy per thread.

    ``slot_mask`` (bool [B, S]) is armed by ``ArcAligner.slots`` and used by the first forward of
    length S; ``lora_mask`` ([B, S', 1] or None) is set only while a wrapped layer runs on slots.
    Being thread-local, a mask armed in one thread never reaches a forward run by another.
    """

    def __init__(self) -> None:
        self.slot_mask: Tensor | None = None
        self.done = False
        self.lora_mask: Tensor | None = None
        self.loops: dict[int, Tensor] = {}  # gated-layer number -> int [B, S]
        self.last_loops: Tensor | None = None

    def arm(self, slot_mask: Tensor) -> None:
        self.slot_mask, self.done, self.loops, self.last_loops = slot_mask, False, {}, None

    def disarm(self) -> None:
        self.slot_mask, self.lora_mask = None, None

    def mask_for(self, hidden_states: Tensor) -> Tensor | None:
        """The slot mask if this forward is the armed one, else None."""
        m = self.slot_mask
        if m is None or self.done or tuple(hidden_states.shape[:2]) != tuple(m.shape):
            return None
        return m.to(hidden_states.device)

    @contextmanager
    def lora(self, mask: Tensor | None) -> Iterator[None]:
        """Make the LoRA wrappers add their update at ``mask`` rows (bool [B, S']) meanwhile."""
        previous = self.lora_mask
        self.lora_mask = None if mask is None else mask.unsqueeze(-1)  # [B, S', 1]
        try:
            yield
        finally:
            self.lora_mask = previous

    def finish(self, n_gated: int) -> None:
        """End of the armed forward: gather loop counts per slot into ``last_loops``."""
        mask = self.slot_mask  # [B, S]
        B = mask.shape[0]
        n_max = int(mask.sum(1).max()) if mask.numel() else 0
        out = torch.zeros(B, n_max, n_gated, dtype=torch.long)  # [B, n_slots_max, G]
        for j, loops in self.loops.items():
            for b in range(B):
                row = loops[b][mask[b].to(loops.device)].cpu()  # [n_b]
                out[b, : row.numel(), j] = row
        self.last_loops, self.done = out, True


# ----------------------------------------------------------------------------- LoRA

class LoRAAdapter(nn.Module):
    """The low-rank update dF = B A x * (alpha / r); B starts at 0 (Hu et al. 2022)."""

    def __init__(self, d_in: int, d_out: int, rank: int = 8, alpha: float = 16.0):
        super().__init__()
        self.d_in, self.d_out, self.rank = d_in, d_out, rank
        self.scaling = alpha / rank
        self.lora_A = nn.Parameter(torch.empty(rank, d_in))
        self.lora_B = nn.Parameter(torch.zeros(d_out, rank))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))

    def forward(self, x: Tensor) -> Tensor:
        """x: [.., d_in] -> [.., d_out] in float32."""
        return F.linear(F.linear(x.float(), self.lora_A), self.lora_B) * self.scaling


class MaskedLoRALinear(nn.Module):
    """ArcAligner eq. (3) at one Linear: base(x) + mask * (B A x) * (alpha / r).

    The mask ([B, S, 1]) is the context's current slot mask; with none active the output is
    exactly ``base(x)``. peft's LoRA cannot do this: it adds the adapter at every position and
    its forward has no per-token mask, whereas here prompt tokens must stay on the frozen path.
    The base Linear is the model's own module (frozen, shared, not copied).
    """

    def __init__(self, base: nn.Linear, rank: int = 8, alpha: float = 16.0,
                 context: SlotContext | None = None, adapter: LoRAAdapter | None = None):
        super().__init__()
        self.base = base
        self.adapter = adapter if adapter is not None else LoRAAdapter(
            base.in_features, base.out_features, rank, alpha)
        if (self.adapter.d_in, self.adapter.d_out) != (base.in_features, base.out_features):
            raise ValueError(f"LoRA adapter {self.adapter.d_in}->{self.adapter.d_out} does not fit "
                             f"Linear {base.in_features}->{base.out_features}")
        self.context = context if context is not None else SlotContext()

    def forward(self, x: Tensor) -> Tensor:
        y = self.base(x)  # [B, S, d_out]
        mask = self.context.lora_mask  # [B, S, 1] or None
        if mask is None:
            return y
        if tuple(mask.shape[:2]) != tuple(x.shape[:2]):
            raise RuntimeError(f"slot mask {tuple(mask.shape)} does not match input {tuple(x.shape)}")
        delta = self.adapter(x) * mask.to(device=x.device, dtype=torch.float32)  # [B, S, d_out]
        return y + delta.to(y.dtype)


# ----------------------------------------------------------------------------- projector, gate

class SlotProjector(nn.Module):
    """W_psi of ArcAligner eq. (1): y = s * W (m / ||m||) + b (init: W = I, b = 0)."""

    def __init__(self, d_memory: int, d_model: int):
        super().__init__()
        self.linear = nn.Linear(d_memory, d_model)
        self.log_scale = nn.Parameter(torch.zeros(()))
        with torch.no_grad():
            nn.init.eye_(self.linear.weight)
            self.linear.bias.zero_()

    def forward(self, memory: Tensor) -> Tensor:
        """memory: [.., d_memory] -> slot embeddings [.., d_model] in float32."""
        m = memory.float()
        m = m / m.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        return F.linear(m, self.linear.weight) * self.log_scale.exp() + self.linear.bias


class SlotGate(nn.Module):
    """g = sigmoid(MLP(rmsnorm(H_r))), ArcAligner eq. (5); untrained: g = sigmoid(-4)."""

    def __init__(self, d_model: int, hidden: int = 64, bias_init: float = GATE_BIAS_INIT):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, 1))
        with torch.no_grad():
            self.mlp[-1].weight.zero_()
            self.mlp[-1].bias.fill_(bias_init)

    def forward(self, h: Tensor) -> Tensor:
        """h: [B, S, d] -> probabilities [B, S, 1] in float32."""
        x = h.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)  # scale-free input
        return torch.sigmoid(self.mlp(x))


# ----------------------------------------------------------------------------- layer wrapper

def _hidden(out):
    """The hidden states from a decoder layer's return value (tensor, or tuple in old versions)."""
    return out if isinstance(out, Tensor) else out[0]


def _with_hidden(out, h: Tensor):
    return h if isinstance(out, Tensor) else (h, *out[1:])


_CACHE_KWARGS = ("past_key_values", "past_key_value", "layer_past")


def _uncached_kwargs(args: tuple, kwargs: dict, S: int, P: int) -> tuple[dict, int]:
    """Layer kwargs for a loop without the cache, sliced to the first P rows when that is known
    to be exact; returns (kwargs, rows). Unknown sequence-shaped arguments -> all S rows."""
    full = dict(kwargs)
    for k in _CACHE_KWARGS:
        if k in full:
            full[k] = None
    full["use_cache"] = False
    if P >= S or args:
        return full, S
    sliced = {}
    for k, v in full.items():
        if k == "attention_mask" and isinstance(v, Tensor):
            if v.dim() != 4 or v.shape[-2] != S or v.shape[-1] < S:
                return full, S
            v = v[..., :P, :P]  # prefill from position 0: key j is token j
        elif k == "position_embeddings" and isinstance(v, tuple):
            if not all(isinstance(t, Tensor) and t.shape[-2] == S for t in v):
                return full, S
            v = tuple(t[..., :P, :] for t in v)  # (cos, sin) [.., S, head_dim]
        elif k in ("position_ids", "cache_position") and isinstance(v, Tensor):
            if v.shape[-1] != S:
                return full, S
            v = v[..., :P]
        elif isinstance(v, Tensor) or (isinstance(v, (tuple, list)) and any(isinstance(t, Tensor) for t in v)):
            return full, S  # some sequence-shaped argument we do not know how to slice
        sliced[k] = v
    return sliced, P


def _check_fresh_cache(layer: nn.Module, kwargs: dict) -> None:
    cache = kwargs.get("past_key_values")
    if cache is None or not hasattr(cache, "get_seq_length"):
        return
    idx = getattr(getattr(layer, "self_attn", None), "layer_idx", 0)
    try:
        seen = cache.get_seq_length(idx)
    except Exception:  # cache types that cannot say: trust the caller
        return
    if seen:
        raise RuntimeError(f"memory slots need a fresh prefill, but the cache already holds {seen} "
                           f"positions at layer {idx}")


class ArcLayer(nn.Module):
    """One decoder layer with ArcAligner's slot path (Algorithm 1, lines 2-16).

    Outside the armed forward it is exactly the original layer. In it: the mandatory pass
    A(H0) (eq. 4, the ordinary call, writes the cache) and, at gated layers, up to T gated loops
    without the cache (eq. 5-9).
    """

    def __init__(self, layer: nn.Module, index: int, aligner: "ArcAligner", gate: SlotGate | None,
                 gate_index: int | None):
        super().__init__()
        self.layer = layer
        self.index = index
        self.gate = gate
        self.gate_index = gate_index
        self._aligner = weakref.ref(aligner)  # a weak link: the aligner is not our submodule

    def forward(self, hidden_states: Tensor, *args, **kwargs):
        aligner = self._aligner()
        ctx = aligner.context
        slot_mask = ctx.mask_for(hidden_states)  # bool [B, S] or None
        if slot_mask is None:
            return self.layer(hidden_states, *args, **kwargs)
        try:
            _check_fresh_cache(self.layer, kwargs)
            with ctx.lora(slot_mask if aligner.lora_enabled else None):
                out = self.layer(hidden_states, *args, **kwargs)  # eq. (4): H^(l+1,0), cached
            if self.gate is not None and aligner.gate_enabled and slot_mask.any():
                h, loops = self._refine(_hidden(out), slot_mask, args, kwargs, aligner)
                out = _with_hidden(out, h)
                ctx.loops[self.gate_index] = loops
        finally:
            if self.index == aligner.n_layers - 1:
                ctx.finish(len(aligner.gated_layers))
        return out

    def _refine(self, h1: Tensor, slot_mask: Tensor, args: tuple, kwargs: dict,
                aligner: "ArcAligner") -> tuple[Tensor, Tensor]:
        """Gated loops t = 1..T (eq. 5-9). h1: [B, S, d] -> (refined [B, S, d], loops int [B, S])."""
        B, S, _ = h1.shape
        last = int(slot_mask.any(0).nonzero().max())  # last slot position in the batch
        P = last + 1 if aligner.prefix_rerun else S
        loop_kwargs, P = _uncached_kwargs(args, kwargs, S, P)
        prefix_mask = slot_mask[:, :P] if aligner.lora_enabled else None  # [B, P]
        slots = slot_mask.unsqueeze(-1)  # [B, S, 1]
        alive = slots.clone()  # slots that have not said stop yet
        loops = torch.zeros(B, S, dtype=torch.long, device=h1.device)
        h = h1
        for _ in range(aligner.max_loops):
            if not alive.any():
                break
            p = self.gate(h)  # eq. (5): [B, S, 1] float32
            hard = (p >= 0.5) & alive  # [B, S, 1]
            if not aligner.training and not hard.any():
                break  # nothing would change: skip the candidate pass
            with aligner.context.lora(prefix_mask):
                cand = _hidden(self.layer.forward(h[:, :P], *args, **loop_kwargs))  # eq. (6), no cache
            cand = torch.cat([cand, h[:, P:]], dim=1)  # [B, S, d]
            if aligner.training:  # eq. (7)-(8): straight-through gate, dead slots frozen
                g = (p + (hard.float() - p).detach()) * alive.float()
                upd = h + g.to(h.dtype) * (cand - h)
            else:  # hard gate: an exact conditional update
                upd = torch.where(hard, cand, h)
            h = torch.where(slots, upd, h1)  # eq. (9): non-slot rows stay as after the pass
            loops += hard.squeeze(-1).long()
            alive = hard
        return h, loops


# ----------------------------------------------------------------------------- the aligner

def _decoder_layers(model: nn.Module) -> nn.ModuleList:
    for get in (lambda m: m.get_decoder().layers, lambda m: m.model.layers, lambda m: m.layers):
        try:
            layers = get(model)
        except AttributeError:
            continue
        if isinstance(layers, nn.ModuleList):
            return layers
    raise ValueError(f"cannot find the decoder layers of {type(model).__name__}")


def _find_linear(layer: nn.Module, name: str) -> tuple[nn.Module, nn.Linear]:
    """(parent, Linear) for a target name, looked up in self_attn then mlp."""
    for part in ("self_attn", "mlp"):
        parent = getattr(layer, part, None)
        if parent is not None and isinstance(getattr(parent, name, None), nn.Linear):
            return parent, getattr(parent, name)
    raise ValueError(f"no Linear named {name!r} in self_attn or mlp of {type(layer).__name__}")


def target_dims_from_config(config, targets=DEFAULT_TARGETS) -> dict[str, tuple[int, int]]:
    """(in, out) sizes of the usual Llama-family projections, from a transformers config."""
    d = config.hidden_size
    head_dim = getattr(config, "head_dim", None) or d // config.num_attention_heads
    q = config.num_attention_heads * head_dim
    kv = (getattr(config, "num_key_value_heads", None) or config.num_attention_heads) * head_dim
    inter = getattr(config, "intermediate_size", d)
    known = {"q_proj": (d, q), "k_proj": (d, kv), "v_proj": (d, kv), "o_proj": (q, d),
             "gate_proj": (d, inter), "up_proj": (d, inter), "down_proj": (inter, d)}
    return {t: known[t] for t in targets}


class ArcAligner(nn.Module):
    """Projector W_psi, selective LoRA and slot gates of ArcAligner (3.2-3.4, Algorithm 1)."""

    def __init__(self, d_memory: int, d_model: int, n_layers: int,
                 gated_layers: tuple[int, ...] | None = None, max_loops: int = 3,
                 lora_rank: int = 8, lora_alpha: float = 16.0,
                 lora_targets: tuple[str, ...] = DEFAULT_TARGETS, gate_hidden: int = 64,
                 target_dims: dict[str, tuple[int, int]] | None = None):
        super().__init__()
        self.d_memory, self.d_model, self.n_layers = d_memory, d_model, n_layers
        self.gated_layers = tuple(default_gated_layers(n_layers) if gated_layers is None
                                  else sorted(set(gated_layers)))
        if any(not 0 <= i < n_layers for i in self.gated_layers):
            raise ValueError(f"gated layers {self.gated_layers} outside 0..{n_layers - 1}")
        self.max_loops = max_loops
        self.lora_targets = tuple(lora_targets)
        dims = {t: (d_model, d_model) for t in self.lora_targets} | dict(target_dims or {})
        self.projector = SlotProjector(d_memory, d_model)
        self.lora = nn.ModuleDict({
            f"{i}_{t}": LoRAAdapter(*dims[t], rank=lora_rank, alpha=lora_alpha)
            for i in range(n_layers) for t in self.lora_targets})
        self.gates = nn.ModuleDict({str(i): SlotGate(d_model, gate_hidden) for i in self.gated_layers})
        self.lora_enabled = True
        self.gate_enabled = True
        self.prefix_rerun = True  # loops re-run only the prefix up to the last slot (exact)
        self.context = SlotContext()
        self._restore: list[tuple[nn.Module, str, nn.Module]] | None = None
        self._attach_lock = threading.Lock()
        self._users = 0  # threads inside ``attached``
        self._attached_to: int | None = None  # id() of the model ``attached`` installed into
        self.train(False)  # inference (hard gate) unless asked

    @classmethod
    def for_model(cls, model: nn.Module, d_memory: int | None = None, **kwargs) -> "ArcAligner":
        """An aligner sized from ``model.config`` (GQA-aware LoRA shapes), initialised from it."""
        config = model.config
        targets = kwargs.pop("lora_targets", DEFAULT_TARGETS)
        aligner = cls(d_memory or config.hidden_size, config.hidden_size, config.num_hidden_layers,
                      lora_targets=targets, target_dims=target_dims_from_config(config, targets),
                      **kwargs)
        return aligner.init_from_model(model)

    @torch.no_grad()
    def init_from_model(self, model: nn.Module) -> "ArcAligner":
        """Projector scale := mean norm of the model's token embeddings (see module docstring)."""
        emb = model.get_input_embeddings().weight.double()  # thread-count independent
        self.projector.log_scale.fill_(emb.norm(dim=-1).mean().log().item())
        return self

    # -- flags --------------------------------------------------------------------------
    @property
    def training_mode(self) -> bool:
        """True: straight-through gate (eq. 7); False: hard gate (inference). Same as ``training``."""
        return self.training

    @training_mode.setter
    def training_mode(self, value: bool) -> None:
        self.train(bool(value))

    @property
    def last_loops(self) -> Tensor | None:
        """int [B, n_slots_max, len(gated_layers)]: extra loops per slot (in slot order) and gated
        layer in the last armed forward; rows with fewer slots are padded with 0."""
        return self.context.last_loops

    # -- slots --------------------------------------------------------------------------
    def project(self, memories: Tensor) -> Tensor:
        """Slot embeddings E~ = W_psi(E), eq. (1): [.., d_memory] -> [.., d_model] float32."""
        return self.projector(memories)

    @contextmanager
    def slots(self, slot_mask: Tensor) -> Iterator["ArcAligner"]:
        """Arm the slots (bool [B, S], True at memory-slot rows) for the next forward of length S."""
        if slot_mask.dtype != torch.bool or slot_mask.dim() != 2:
            raise ValueError("slot_mask must be a bool tensor [batch, seq]")
        self.context.arm(slot_mask)
        try:
            yield self
        finally:
            self.context.disarm()

    # -- attaching ----------------------------------------------------------------------
    def attach(self, model: nn.Module) -> None:
        """Install the LoRA Linear wrappers and the layer wrappers into ``model``."""
        if self._restore is not None:
            raise RuntimeError("this aligner is already attached")
        layers = _decoder_layers(model)
        if len(layers) != self.n_layers:
            raise ValueError(f"the model has {len(layers)} layers, the aligner {self.n_layers}")
        restore: list[tuple[nn.Module, str, nn.Module]] = []
        try:
            for i, layer in enumerate(layers):
                for t in self.lora_targets:
                    parent, linear = _find_linear(layer, t)
                    wrapper = MaskedLoRALinear(linear, context=self.context, adapter=self.lora[f"{i}_{t}"])
                    setattr(parent, t, wrapper)
                    restore.append((parent, t, linear))
                gate = self.gates[str(i)] if i in self.gated_layers else None
                gate_index = self.gated_layers.index(i) if gate is not None else None
                layers[i] = ArcLayer(layer, i, self, gate, gate_index)
                restore.append((layers, str(i), layer))
        except Exception:
            self._undo(restore)
            raise
        self._restore = restore

    def detach(self, model: nn.Module | None = None) -> None:
        """Put every original module back where it was."""
        if self._restore is None:
            return
        self._undo(self._restore)
        self._restore = None

    @staticmethod
    def _undo(restore: list[tuple[nn.Module, str, nn.Module]]) -> None:
        for parent, name, original in reversed(restore):
            if isinstance(parent, nn.ModuleList):
                parent[int(name)] = original
            else:
                setattr(parent, name, original)

    @contextmanager
    def attached(self, model: nn.Module) -> Iterator["ArcAligner"]:
        """``with aligner.attached(model): ...`` attaches, then always detaches.

        Reference-counted: concurrent (or nested) users of the same model share one attachment,
        installed by the first and removed by the last.
        """
        with self._attach_lock:
            if self._users == 0:
                self.attach(model)
                self._attached_to = id(model)
            elif self._attached_to != id(model):
                raise RuntimeError("this aligner is attached to another model")
            self._users += 1
        try:
            yield self
        finally:
            with self._attach_lock:
                self._users -= 1
                if self._users == 0:
                    self._attached_to = None
                    self.detach(model)
