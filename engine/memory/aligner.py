"""ArcAligner: memory slots refined inside the frozen backbone (ArcAligner 3.2-3.4, Algorithm 1).

Node memories enter the causal LM as "memory slots": input-embedding rows placed before the
question. Three trainable parts act on them, and only on them:

- ``projector`` W_psi (eq. 1-2): memory space -> input-embedding space (here).
- selective LoRA (eq. 3, ``engine.memory.slot_lora``): A(H) = F(H) + M_r * dF(H). A low-rank
  update on the attention projections (q/k/v/o by default) of every decoder layer, added only
  at slot rows.
- slot-wise gates (eq. 5-9, ``engine.memory.gated_layer``) at the gated layers: after the
  layer's normal pass, up to T more applications of A to the slot rows, each one only where the
  gate says so. Training uses the straight-through gate (eq. 7), inference the hard gate.
  Non-slot rows keep the normal pass's output (eq. 9). A slot whose gate says stop stops for
  good; its loop count is the number of steps with g = 1 before the first 0.

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

import threading
from contextlib import contextmanager
from typing import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from engine.memory.gated_layer import ArcLayer, SlotGate, default_gated_layers
from engine.memory.slot_lora import LoRAAdapter, MaskedLoRALinear, SlotContext

# The parts live in ``slot_lora`` (eq. 3) and ``gated_layer`` (eq. 5-9); named here as well.
__all__ = ["DEFAULT_TARGETS", "ArcAligner", "ArcLayer", "LoRAAdapter", "MaskedLoRALinear",
           "SlotContext", "SlotGate", "SlotProjector", "default_gated_layers",
           "target_dims_from_config"]

DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


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
