"""The small trainable parts of H2MT, in one module saved and loaded as safetensors.

The backbone stays frozen; everything learned lives here (H2MT appendix E "Trainable
components"): the write/read embeddings e_write, e_read (3.2.1), the aggregation policy Agg
(3.2.2, appendix B) and the scale at which an aggregated memory re-enters the backbone.
Later issues add the router projections and the ArcAligner parts to this same module.

Untrained initialisation (before any checkpoint exists), chosen so that memories are already
useful for similarity:
- e_write is the mean token embedding of a real instruction, ``WRITE_PROMPT``; e_read the mean
  token embedding of ``READ_PROMPT``. The read slot thus looks like the end of "the text above
  is about", and its final hidden state (the memory) is the model's summary of what came before.
  A mean of real embeddings keeps the slot inside the embedding distribution (norm, direction),
  which a random vector would not.
- Memories are final hidden states, after the backbone's last norm: their scale is not a token
  embedding's (see DESIGN's pitfalls). An aggregated memory m~_v is fed back as
  ``memory_scale * m~_v / ||m~_v||``; ``memory_scale`` starts at the mean norm of the backbone's
  token embeddings and is learned.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from engine.memory.aggregate import make_aggregator
from engine.memory.aligner import DEFAULT_TARGETS, ArcAligner, target_dims_from_config
from engine.memory.projections import RouterProjections

WRITE_PROMPT = "Summarize the following section of a technical manual."
READ_PROMPT = "In short, the section above is about"


class H2MTParts(nn.Module):
    """e_write, e_read, Agg, the memory input scale (H2MT 3.2) and the router's W_q, W_k (3.3)."""

    def __init__(self, d_model: int, aggregation: str = "mean", aligner: dict | None = None,
                 **agg_opts):
        super().__init__()
        self.d_model = d_model
        self.aggregation = aggregation
        self.agg_opts = agg_opts
        self.e_write = nn.Parameter(torch.zeros(d_model))
        self.e_read = nn.Parameter(torch.zeros(d_model))
        self.log_memory_scale = nn.Parameter(torch.zeros(()))
        self.agg = make_aggregator(aggregation, d_model, **agg_opts)
        self.router = RouterProjections(d_model)  # W_q, W_k of H2MT 3.3 (not part of memories)
        # ArcAligner (projector, masked LoRA, gates); sized from the backbone, so built by
        # init_from_backbone or from a checkpoint's saved config.
        self.aligner_config = aligner
        self.aligner = ArcAligner(**_aligner_kwargs(aligner)) if aligner else None

    # -- initialisation -------------------------------------------------------------------
    @torch.no_grad()
    def init_from_backbone(self, backbone) -> "H2MTParts":
        """Untrained initialisation from real token embeddings (see module docstring)."""
        # float64, then stored as float32: a float32 reduction's result depends on the number
        # of CPU threads (summation order), and these values enter the memory fingerprint.
        emb = backbone.model.get_input_embeddings().weight.double()

        def mean_embedding(text: str) -> torch.Tensor:
            ids = torch.tensor(backbone.encode(text), device=emb.device)
            return emb[ids].mean(0)

        self.e_write.copy_(mean_embedding(WRITE_PROMPT).cpu())
        self.e_read.copy_(mean_embedding(READ_PROMPT).cpu())
        self.log_memory_scale.fill_(emb.norm(dim=-1).mean().log().item())
        if self.aligner is None:
            cfg = backbone.model.config
            targets = DEFAULT_TARGETS
            self.aligner_config = {
                "d_memory": self.d_model, "d_model": cfg.hidden_size,
                "n_layers": cfg.num_hidden_layers, "lora_targets": list(targets),
                "target_dims": {k: list(v) for k, v in target_dims_from_config(cfg, targets).items()}}
            self.aligner = ArcAligner(**_aligner_kwargs(self.aligner_config))
        self.aligner.init_from_model(backbone.model)
        return self

    @property
    def memory_scale(self) -> torch.Tensor:
        return self.log_memory_scale.exp()

    def memory_as_input(self, m: torch.Tensor) -> torch.Tensor:
        """Map an aggregated memory [.., d] to the scale of an input embedding."""
        return m / m.norm(dim=-1, keepdim=True).clamp_min(1e-6) * self.memory_scale.to(m.dtype)

    # -- identity -------------------------------------------------------------------------
    def writer_state(self) -> dict[str, torch.Tensor]:
        """The tensors that determine memories (router parts, when added, do not)."""
        return {k: v for k, v in self.state_dict().items()
                if k.startswith(("e_write", "e_read", "log_memory_scale", "agg."))}

    def fingerprint(self, backbone_name: str) -> str:
        """Identity of every memory this writer produces: backbone + trained parts + policy."""
        h = hashlib.sha256()
        h.update(backbone_name.encode())
        h.update(json.dumps({"aggregation": self.aggregation, "opts": self.agg_opts},
                            sort_keys=True).encode())
        for k, v in sorted(self.writer_state().items()):
            h.update(k.encode())
            h.update(v.detach().cpu().float().contiguous().numpy().tobytes())
        return h.hexdigest()[:24]

    # -- persistence ----------------------------------------------------------------------
    def save(self, path: str | Path, **meta: str) -> None:
        config = {"d_model": self.d_model, "aggregation": self.aggregation,
                  "agg_opts": self.agg_opts, "aligner": self.aligner_config, **meta}
        state = {k: v.detach().cpu().contiguous() for k, v in self.state_dict().items()}
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        save_file(state, str(path), metadata={"h2mt_config": json.dumps(config)})

    @classmethod
    def load(cls, path: str | Path) -> "H2MTParts":
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            config = json.loads(f.metadata()["h2mt_config"])
        parts = cls(config["d_model"], config["aggregation"], config.get("aligner"),
                    **config.get("agg_opts", {}))
        parts.load_state_dict(load_file(str(path)))
        return parts


def _aligner_kwargs(config: dict) -> dict:
    kw = dict(config)
    kw["lora_targets"] = tuple(kw.get("lora_targets", DEFAULT_TARGETS))
    if kw.get("target_dims"):
        kw["target_dims"] = {k: tuple(v) for k, v in kw["target_dims"].items()}
    if kw.get("gated_layers") is not None:
        kw["gated_layers"] = tuple(kw["gated_layers"])
    return kw


def load_or_init_parts(settings, backbone) -> H2MTParts:
    """The parts from the configured checkpoint (the shipped one by default), else the
    untrained initialisation."""
    path = settings.checkpoint_path
    if path is not None:
        if not Path(path).is_file():
            raise FileNotFoundError(f"checkpoint {path} not found (H2MT_CHECKPOINT)")
        parts = H2MTParts.load(path)
        if parts.d_model != backbone.hidden_size:
            raise ValueError(f"checkpoint {path} is for d_model={parts.d_model}, "
                             f"the backbone has {backbone.hidden_size}")
    else:
        parts = H2MTParts(backbone.hidden_size, settings.aggregation).init_from_backbone(backbone)
    return parts.to(backbone.device).eval()
