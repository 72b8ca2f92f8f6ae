"""The backbone's dequantized cache: its config names the model class, for an inference server
too, and says the weights are plain (no GGUF marker), and a cache written before that is upgraded in place (weights untouched)."""
from __future__ import annotations

import json
import shutil

from engine.memory.backbone import (ensure_gguf_cache, gguf_cache_dir, repair_cache_config,
                                    resolve_backbone, smollm2_gguf_path)
from engine.settings import Settings


def test_the_cache_names_its_architecture_and_is_not_marked_quantized():
    folder, local_only, _ = resolve_backbone(Settings())
    assert local_only
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert "quantization_config" not in config  # plain weights: no GGUF casting on CUDA


def test_an_older_cache_is_upgraded_in_place(tmp_path):
    gguf = smollm2_gguf_path(Settings().cache_dir)
    current, _, _ = resolve_backbone(Settings())
    old = gguf_cache_dir(gguf, tmp_path)  # a cache as written before: no architectures
    old.mkdir(parents=True)
    config = json.loads((current / "config.json").read_text())
    config.pop("architectures")
    # and the GGUF marker transformers copied into caches written before
    marker = {"dequantize": False, "gguf_file": gguf.name, "quant_method": "gguf"}
    (old / "config.json").write_text(json.dumps({**config, "quantization_config": marker}))
    (old / "complete.json").write_text("{}")
    shutil.copy(current / "generation_config.json", old)

    assert ensure_gguf_cache(gguf, tmp_path) == old  # found complete: nothing dequantized again
    upgraded = json.loads((old / "config.json").read_text())
    assert upgraded.pop("architectures") == ["LlamaForCausalLM"] and upgraded == config
    assert not repair_cache_config(old)  # once only
    assert sorted(p.name for p in old.iterdir()) == ["complete.json", "config.json",
                                                      "generation_config.json"]
