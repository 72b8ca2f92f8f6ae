"""A backbone's name as a person reads it (engine.memory.backbone.model_title)."""
import pytest

from engine.memory.backbone import model_title


@pytest.mark.parametrize("name, title", [
    ("smollm2-135m-instruct-q4_1-b179c9523d0e6a0f", "SmolLM2-135M-Instruct"),
    ("my-model.Q4_0-0123456789abcdef", "my-model.Q4_0"),
    ("local:/models/Qwen2.5-0.5B-Instruct", "Qwen2.5-0.5B-Instruct"),
    ("hub:HuggingFaceTB/SmolLM2-360M-Instruct", "HuggingFaceTB/SmolLM2-360M-Instruct"),
])
def test_model_title_drops_the_digest(name, title):
    assert model_title(name) == title
