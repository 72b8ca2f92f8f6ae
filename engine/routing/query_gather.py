"""The H2MT query vector of asks that arrive together, in one backbone pass (H2MT 3.3).

``gathered_query_vector`` is ``engine.routing.router.query_vector`` for concurrent callers: the
questions gathered within a few milliseconds (``engine.serving.gather``) go through the backbone
as one right-padded batch (``query_vectors``; equal to the question alone to rounding, see
``engine.serving.gather``). One gatherer per (backbone, fraction), kept beside the parts object
and dropped with it.
"""
from __future__ import annotations

import threading
import weakref

import torch

from engine.routing.router import query_vector, query_vectors
from engine.serving.gather import Gatherer

_GATHERERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # parts -> {key: Gatherer}
_LOCK = threading.Lock()


def _run(questions: list[str], backbone, parts, fraction: float) -> list[torch.Tensor]:
    if len(questions) == 1:  # alone: the unpadded single pass
        return [query_vector(questions[0], backbone, parts, fraction)]
    return list(query_vectors(questions, backbone, parts, fraction))


def gathered_query_vector(question: str, backbone, parts, fraction: float = 0.5) -> torch.Tensor:
    """``query_vector(question, backbone, parts, fraction)``, computed with the questions of
    other asks that arrive at the same moment: [d] float32 on the CPU."""
    with _LOCK:
        per_parts = _GATHERERS.setdefault(parts, {})
        key = (id(backbone), fraction)
        gatherer = per_parts.get(key)
        if gatherer is None:
            gatherer = per_parts[key] = Gatherer(
                lambda qs: _run(qs, backbone, parts, fraction))
    return gatherer(question).clone()  # equal questions share a row: each caller its own
