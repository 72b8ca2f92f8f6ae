"""The prompts of the answer modes (H2MT 3.3 "Output generation"), as ``decoding.Plan``s, all
through the model's chat template:

- memory slots: the selected nodes' memories become input embeddings placed in the user turn
  before the question text; the model never generates from memory vectors alone. Slots go
  through the ArcAligner projector and, when enabled, its masked LoRA and gate
  (engine/memory/aligner.py); otherwise through the parts' memory input scale. Optionally HDT's
  hierarchical positional encoding of each node's tree path is added to its slot.
- text: numbered manual sections (or sentences) and the question, read by the reader.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from engine.answer.generation.decoding import Plan
from engine.memory.backbone import Backbone
from engine.serving.reader import Reader

SLOT_MARKER = "\u2063MEMORY\u2063"  # invisible separators: never in user text, split on it
SYSTEM_PROMPT = ("You answer questions about a technical manual. Use the provided context; "
                 "answer briefly and precisely.")
# Text mode's prompt (the memory prompt above is the one the parts were trained with).
TEXT_SYSTEM_PROMPT = ("You answer questions about a technical manual from the numbered manual "
                      "sections given. Answer from those sections only. Name the exact command, "
                      "option or function the manual uses. If the sections do not answer the "
                      "question, say: the manual does not say.")
# Text mode's prompts by name (AskOptions.text_prompt, which says why "generic" is the default):
# "generic" is the memory prompt above, "manual" the stricter one.
TEXT_PROMPTS = {"generic": SYSTEM_PROMPT, "manual": TEXT_SYSTEM_PROMPT}


def chat_messages(user_text: str, system: str = SYSTEM_PROMPT) -> list[dict]:
    """The system and user turns of a prompt: the local model's chat template renders them
    (``chat_parts``); a served reader gets them as they are and applies its own."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user_text}]


def render_chat(backbone: Backbone, messages: list[dict]) -> str:
    """The chat turns through the local model's chat template, the assistant's turn opened."""
    return backbone.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=True)


def chat_parts(backbone: Backbone, user_text: str, system: str = SYSTEM_PROMPT) -> list[str]:
    """The chat-templated prompt split at SLOT_MARKER (text before, [between...], after)."""
    return render_chat(backbone, chat_messages(user_text, system)).split(SLOT_MARKER)


def embed_text(backbone: Backbone, text: str) -> torch.Tensor:
    ids = torch.tensor(backbone.encode(text), dtype=torch.long)
    return backbone.embed(ids).float().cpu() if len(ids) else torch.zeros(0, backbone.hidden_size)


def hierarchical_position_encoding(paths: list[list[int]], d: int) -> torch.Tensor:
    """HDT eq. (2): sum over levels l of sinusoids of the node's index p^l at that level.

    ``paths[i]`` holds the 1-based sibling index of each ancestor (root excluded) down to node i.
    Returns [len(paths), d] with rows of unit RMS (scaled by the caller).
    """
    k = torch.arange(d // 2, dtype=torch.float32)
    omega = 1.0 / (10000 ** (2 * k / d))
    out = torch.zeros(len(paths), d)
    for i, path in enumerate(paths):
        for p in path:
            out[i, 0::2][: len(k)] += torch.sin(omega * p)
            out[i, 1::2][: len(k)] += torch.cos(omega * p)
    rms = out.pow(2).mean(-1, keepdim=True).sqrt().clamp_min(1e-6)
    return out / rms


def path_indices(routing, rid: int) -> list[int]:
    """1-based sibling index of each ancestor below the root, down to the node (HDT's p^l)."""
    path = []
    cur = rid
    while routing.parent[cur] is not None:
        path.append(routing.children[routing.parent[cur]].index(cur) + 1)
        cur = routing.parent[cur]
    return path[::-1]


def slot_embeddings(backbone: Backbone, parts, memories: torch.Tensor,
                    paths: list[list[int]] | None, hier_pos_scale: float = 0.1) -> torch.Tensor:
    """Memory slots in the input space: ArcAligner projector (eq. 1) or the parts' scale; with
    ``paths``, HDT's encoding added at ``hier_pos_scale`` of the slot's norm."""
    aligner = getattr(parts, "aligner", None)
    with torch.no_grad():
        if aligner is not None:
            slots = aligner.project(memories.to(backbone.device)).float().cpu()
        else:
            slots = parts.memory_as_input(memories.to(backbone.device)).float().cpu()
    if paths:
        hpe = hierarchical_position_encoding(paths, slots.shape[-1])
        slots = slots + hier_pos_scale * slots.norm(dim=-1, keepdim=True) / math.sqrt(slots.shape[-1]) * hpe
    return slots


def prompt_around_slots(backbone: Backbone, question: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings [n, d] of the memory-mode prompt before and after the slots (training builds
    L_gen's prefixes with this too, so it trains on exactly the prompt the product uses)."""
    before, after = chat_parts(backbone, f"Context: {SLOT_MARKER}\n\nQuestion: {question.strip()}")
    return embed_text(backbone, before), embed_text(backbone, after)


@dataclass(frozen=True)
class Slots:
    """The memories a prompt holds as slots [n, d], and their tree paths (None: no
    hierarchical positions) as ``slot_embeddings`` reads them."""

    memories: torch.Tensor
    paths: list[list[int]] | None = None


def slots_plan(backbone: Backbone, parts, question: str, given: Slots, gate: bool) -> Plan:
    """H2MT generation: [chat prefix; "Context:"; slots; question; assistant prefix], the slots
    ``given``'s (``slot_embeddings``); ``gate``: ArcAligner's gate on."""
    head, tail = prompt_around_slots(backbone, question)
    slots = slot_embeddings(backbone, parts, given.memories, given.paths)
    slot_mask = torch.cat([torch.zeros(len(head), dtype=torch.bool), torch.ones(len(slots), dtype=torch.bool),
                           torch.zeros(len(tail), dtype=torch.bool)])
    aligner = getattr(parts, "aligner", None)
    return Plan(backbone, [head, slots, tail], slot_mask, aligner if gate else None)


def text_plan(reader: Reader, question: str, context_text: str, system: str = SYSTEM_PROMPT):
    """With context: the manual sections under ``system``; without: the question alone under
    the generic prompt; the reader's plan for those two turns (``Reader.chat_plan``)."""
    if context_text:
        user = f"Manual sections:\n{context_text}\n\nQuestion: {question.strip()}"
    else:
        user, system = question.strip(), SYSTEM_PROMPT
    return reader.chat_plan(chat_messages(user, system))
