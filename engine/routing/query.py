"""The memory router's query vector (H2MT 3.3): q = h_L([e_write; E_q[1:n_q]; e_read])[last],
n_q = floor(T * fraction), fraction 1/2 as in the paper (a setting).

``gathered_query_vector`` is ``query_vector`` for concurrent asks: the questions gathered within
a few milliseconds (``engine.routing.gather``) go through the backbone as one right-padded batch
(``query_vectors``; equal to the question alone to rounding). One gatherer per (backbone,
fraction), kept beside the parts object and dropped with it.
"""
from __future__ import annotations

import math
import threading
import weakref

import torch

from engine.memory.writer import _Item, read_out
from engine.routing.gather import Gatherer

_GATHERERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # parts -> {key: Gatherer}
_GATHERERS_LOCK = threading.Lock()


def query_ids(backbone, question: str, fraction: float = 0.5) -> list[int]:
    """E_q[1:n_q] of H2MT 3.3 as token ids: the first n_q = floor(T * fraction) tokens."""
    ids = backbone.encode(question.strip())
    return ids[:max(1, math.floor(len(ids) * fraction))] if ids else []


@torch.no_grad()
def query_vectors(questions: list[str], backbone, parts, fraction: float = 0.5,
                  batch: int = 64) -> torch.Tensor:
    """q = h_L([e_write; E_q[1:n_q]; e_read])[last] with n_q = floor(T * fraction) (H2MT 3.3),
    for many questions in right-padded batches: [len(questions), d] float32 on the CPU."""
    items = [_Item(i, query_ids(backbone, q, fraction), None) for i, q in enumerate(questions)]
    out = torch.zeros(len(items), backbone.hidden_size)
    for j in range(0, len(items), batch):
        chunk = items[j:j + batch]
        out[j:j + len(chunk)] = read_out(backbone, parts, chunk).cpu()
    return out


@torch.inference_mode()
def query_vector(question: str, backbone, parts, fraction: float = 0.5) -> torch.Tensor:
    """The query vector of one question (see ``query_vectors``): [d].

    One unpadded sequence: no attention mask to build, no padding, under inference mode. The
    same function as ``query_vectors`` (equal to it in tests) and faster (docs/results.md,
    "Routing cost": the pass is the backbone's weights read once for a handful of positions)."""
    ids = torch.tensor(query_ids(backbone, question, fraction), dtype=torch.long)
    device, dtype = backbone.device, backbone.dtype
    rows = [parts.e_write.to(device, dtype).view(1, -1)]
    if len(ids):
        rows.append(backbone.embed(ids).to(dtype))
    rows.append(parts.e_read.to(device, dtype).view(1, -1))
    embeds = torch.cat(rows).unsqueeze(0)
    body = (backbone.model.get_decoder() if hasattr(backbone.model, "get_decoder")
            else backbone.model.model)
    hidden = body(inputs_embeds=embeds, use_cache=False).last_hidden_state
    return hidden[0, -1].float().cpu().clone()


def _gathered(questions: list[str], backbone, parts, fraction: float) -> list[torch.Tensor]:
    if len(questions) == 1:  # alone: the unpadded single pass
        return [query_vector(questions[0], backbone, parts, fraction)]
    return list(query_vectors(questions, backbone, parts, fraction))


def gathered_query_vector(question: str, backbone, parts, fraction: float = 0.5) -> torch.Tensor:
    """``query_vector(question, backbone, parts, fraction)``, computed in one pass with the
    questions of other asks that arrive at the same moment: [d] float32 on the CPU."""
    with _GATHERERS_LOCK:
        per_parts = _GATHERERS.setdefault(parts, {})
        key = (id(backbone), fraction)
        gatherer = per_parts.get(key)
        if gatherer is None:
            def run(questions: list[str]) -> list[torch.Tensor]:
                return _gathered(questions, backbone, parts, fraction)

            gatherer = per_parts[key] = Gatherer(run)
    return gatherer(question).clone()  # equal questions share a row: each caller its own
