"""Shared fixtures: the corpus folder beside the repository and one parsed tree per file."""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import pytest

# ../shared beside the repository; H2MT_SHARED_DIR points elsewhere (a checkout in another folder)
SHARED = Path(os.environ.get("H2MT_SHARED_DIR") or Path(__file__).resolve().parents[1].parent / "shared")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not (SHARED / "corpus").is_dir():
        pytest.skip(f"shared corpus not found at {SHARED} (expected ../shared beside the repo)")
    return SHARED


@lru_cache(maxsize=None)
def _raw_tree(path: Path):
    from engine.document.builders import build_raw_tree

    return build_raw_tree(path)


@pytest.fixture(scope="session")
def corpus_tree(shared_dir):
    """corpus_tree("etoolbox-manual.pdf") -> its raw Tree, parsed once per test session."""
    def get(name: str):
        path = shared_dir / "corpus" / name
        if not path.exists():
            pytest.skip(f"{path} missing")
        return _raw_tree(path)
    return get

# -- models ------------------------------------------------------------------------------------
import pytest as _pytest


@_pytest.fixture(scope="session")
def real_tokenizer():
    """The default backbone's real tokenizer (from the dequantized cache; built on first use)."""
    from engine.memory.backbone import load_tokenizer
    from engine.settings import Settings

    return load_tokenizer(Settings())


@_pytest.fixture(scope="session")
def tiny_backbone(real_tokenizer):
    """A tiny randomly initialised Llama with the real tokenizer: seconds, not minutes."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from engine.memory.backbone import Backbone

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(real_tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, tie_word_embeddings=True)
    model = LlamaForCausalLM(config).eval().requires_grad_(False)
    return Backbone(model=model, tokenizer=real_tokenizer, name="tiny-llama-test",
                    device=torch.device("cpu"), dtype=torch.float32)


@_pytest.fixture(scope="session")
def tiny_parts(tiny_backbone):
    from engine.memory.parts import H2MTParts

    return H2MTParts(tiny_backbone.hidden_size, "mean").init_from_backbone(tiny_backbone)


@_pytest.fixture(scope="session")
def real_backbone():
    """The real SmolLM2-135M-Instruct (dequantized cache; about 5 s after the first time)."""
    from engine.memory.backbone import load_backbone
    from engine.settings import Settings

    return load_backbone(Settings())


# -- the app, served once per test session (browser and API tests share it) ----------------------

def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@_pytest.fixture(scope="session")
def explorer_server(real_backbone, tmp_path_factory):
    """(url, runtime) of the explorer launched in-process on a temporary SQLite library."""
    import os

    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from app.ui import build_app
    from engine.memory.parts import load_or_init_parts
    from engine.runtime import Runtime
    from engine.settings import Settings
    from storage import Library

    data = tmp_path_factory.mktemp("explorer")
    settings = Settings(data_dir=data)
    parts = load_or_init_parts(settings, real_backbone)  # what a user gets: the shipped parts
    rt = Runtime(settings, real_backbone, parts, Library(settings.database_url))
    demo = build_app(rt)
    port = _free_port()
    demo.queue().launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port,
                        ssr_mode=False, quiet=True)
    try:
        yield f"http://127.0.0.1:{port}/", rt
    finally:
        demo.close()
        rt.library.close()
