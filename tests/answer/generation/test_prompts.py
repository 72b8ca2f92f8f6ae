"""engine.answer.generation.prompts: the text prompt with and without context, and the memory prompt with
one slot position per memory."""
from __future__ import annotations

import torch

from engine.answer.generation.reader import InProcessReader
from engine.answer.generation.prompts import (SLOT_MARKER, TEXT_PROMPTS, chat_parts,
                                   hierarchical_position_encoding, prompt_around_slots,
                                   Slots, slots_plan, text_plan)


def test_text_prompt_carries_the_sections_under_the_chosen_system_prompt(tiny_backbone):
    plan = text_plan(InProcessReader(tiny_backbone), " Why? ", "[1] Intro:\nBecause.", TEXT_PROMPTS["manual"])
    (rendered,) = chat_parts(tiny_backbone, "Manual sections:\n[1] Intro:\nBecause.\n\n"
                                            "Question: Why?", TEXT_PROMPTS["manual"])
    assert plan.model is tiny_backbone and plan.slot_mask is None and plan.aligner is None
    assert len(plan.pieces) == 1 and len(plan.pieces[0]) == len(tiny_backbone.encode(rendered))
    bare = text_plan(InProcessReader(tiny_backbone), "Why?", "")
    assert len(bare.pieces[0]) < len(plan.pieces[0])


def test_memory_prompt_has_one_masked_slot_per_memory(tiny_backbone, tiny_parts):
    memories = torch.randn(3, tiny_backbone.hidden_size)
    plan = slots_plan(tiny_backbone, tiny_parts, "Which supply?", Slots(memories), gate=True)
    head, tail = prompt_around_slots(tiny_backbone, "Which supply?")
    assert [len(p) for p in plan.pieces] == [len(head), 3, len(tail)]
    assert plan.slot_mask.tolist() == [False] * len(head) + [True] * 3 + [False] * len(tail)
    assert plan.aligner is getattr(tiny_parts, "aligner", None)
    assert slots_plan(tiny_backbone, tiny_parts, "Which supply?", Slots(memories),
                      gate=False).aligner is None
    with_paths = slots_plan(tiny_backbone, tiny_parts, "Which supply?",
                            Slots(memories, [[1], [2], [2, 1]]), gate=False)
    assert not torch.allclose(with_paths.pieces[1], plan.pieces[1])  # HDT positions added
    assert SLOT_MARKER not in "".join(chat_parts(tiny_backbone, "x"))


def test_hierarchical_position_encoding_distinguishes_paths():
    hpe = hierarchical_position_encoding([[1], [2], [1, 1], [1, 2]], 64)
    assert hpe.shape == (4, 64)
    assert torch.allclose(hpe.pow(2).mean(-1), torch.ones(4))
    assert not torch.allclose(hpe[2], hpe[3])
