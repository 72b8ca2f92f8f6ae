"""The backbone's dequantized cache: its config names the model class, for an inference server
too, and a cache written before that is upgraded in place (weights untouched)."""
from __future__ import annotations

import json
import shutil

from engine.memory.backbone import (ensure_gguf_cache, gguf_cache_dir, name_architecture,
                                    resolve_backbone, smollm2_gguf_path)
from engine.settings import Settings


def test_the_cache_names_its_architecture():
    folder, local_only, _ = resolve_backbone(Settings())
    assert local_only
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]


def test_an_older_cache_is_upgraded_in_place(tmp_path):
    gguf = smollm2_gguf_path(Settings().cache_dir)
    current, _, _ = resolve_backbone(Settings())
    old = gguf_cache_dir(gguf, tmp_path)  # a cache as written before: no architectures
    old.mkdir(parents=True)
    config = json.loads((current / "config.json").read_text())
    config.pop("architectures")
    (old / "config.json").write_text(json.dumps(config))
    (old / "complete.json").write_text("{}")
    shutil.copy(current / "generation_config.json", old)

    assert ensure_gguf_cache(gguf, tmp_path) == old  # found complete: nothing dequantized again
    upgraded = json.loads((old / "config.json").read_text())
    assert upgraded.pop("architectures") == ["LlamaForCausalLM"] and upgraded == config
    assert not name_architecture(old)  # once only
    assert sorted(p.name for p in old.iterdir()) == ["complete.json", "config.json",
                                                      "generation_config.json"]
