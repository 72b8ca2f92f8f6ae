"""The H2MT query vector (3.3): the single-question path computes the batched function."""
from __future__ import annotations

import torch

from engine.routing.query import query_vector, query_vectors


def test_one_question_path_equals_the_batched_padded_one(tiny_backbone, tiny_parts):
    questions = ["How do I patch a command?", "What does \\ifdefempty test, and when is it true "
                 "for a macro defined with a space only?", "x"]
    batched = query_vectors(questions, tiny_backbone, tiny_parts)  # padded to the longest
    for i, q in enumerate(questions):
        one = query_vector(q, tiny_backbone, tiny_parts)
        assert one.shape == (tiny_backbone.hidden_size,) and one.dtype == torch.float32
        torch.testing.assert_close(one, batched[i], rtol=1e-4, atol=1e-5)


def test_blank_question_reads_the_bare_slots(tiny_backbone, tiny_parts):
    torch.testing.assert_close(query_vector("  ", tiny_backbone, tiny_parts),
                               query_vectors([""], tiny_backbone, tiny_parts)[0])
