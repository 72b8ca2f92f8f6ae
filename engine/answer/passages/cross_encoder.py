"""The quote's cross-encoder (issue 66): the question and a candidate entry in one input to the
bundled all-MiniLM-L6-v2, one relevance logit from its pooler (the cross-encoder reading of a
BERT model: Nogueira and Cho 2019, "Passage Re-ranking with BERT").

The weights are the bundled sentence encoder's (``engine.routing.dense.model_path``) with the
tensors a fit on Debian man pages and FAQs changed loaded over them
(``assets/cross_encoder.safetensors``: the top layers, the pooler and the head, fp16;
``engine.training.cross_fit``, card ``assets/CROSS_ENCODER_CARD.md``). Every candidate is read
in one batched forward pass, each cut to ``MAX_LENGTH`` word pieces with the question.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

ASSET = Path(__file__).resolve().parents[3] / "assets" / "cross_encoder.safetensors"
MAX_LENGTH = 96  # word pieces of the question and an entry together (the entry is cut)


class CrossEncoder:
    """``scores(question, passages)``: (one logit per passage, the batch's positions)."""

    def __init__(self, model, tokenizer, max_length: int = MAX_LENGTH):
        self.model, self.tok, self.max_length = model.eval(), tokenizer, max_length

    def scores(self, question: str, passages: list[str]) -> tuple[np.ndarray, int]:
        import torch

        if not passages:
            return np.zeros(0, np.float32), 0
        enc = self.tok([question.strip()] * len(passages), list(passages),
                       truncation="only_second", max_length=self.max_length, padding=True,
                       return_tensors="pt")
        with torch.inference_mode():
            out = self.model(**enc).logits[:, 0].float().numpy()
        return out, int(enc["input_ids"].numel())


def load(path: Path = ASSET) -> CrossEncoder:
    """The bundled MiniLM with the fitted tensors of ``path`` over it. A file missing, or one
    whose tensors do not fit the model, is an error (the asset ships with the code)."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from engine.routing.dense import model_path

    if not Path(path).is_file():
        raise FileNotFoundError(f"the cross-encoder's weights are missing: {path}")
    base = str(model_path())
    model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1)
    fitted = {k: v.to(torch.float32) for k, v in load_file(str(path)).items()}
    own = model.state_dict()
    wrong = [k for k, v in fitted.items() if k not in own or own[k].shape != v.shape]
    if wrong or not any(k.startswith("classifier.") for k in fitted):
        raise ValueError(f"{path} does not fit all-MiniLM-L6-v2's cross-encoder: {wrong[:3]}")
    model.load_state_dict(fitted, strict=False)
    return CrossEncoder(model, AutoTokenizer.from_pretrained(base))
