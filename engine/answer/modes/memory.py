"""``memory``: H2MT. The selected nodes' memories as slots in the prompt (``prompts.slots_plan``).
It reads no text, so its answer is checked against the routed sections' text."""
from __future__ import annotations

from engine.answer.passages.sections import routed_text
from engine.answer.modes.base import Mode, Step
from engine.answer.request import Request
from engine.answer.generation.prompts import Slots, path_indices, slots_plan, text_plan
from engine.answer.generation.reader import InProcessReader


class MemoryMode(Mode):
    name = "memory"
    help = "fast: answers from the sections' memory vectors (H2MT), less reliable"
    label = "Fast answer from memory"
    needs_memories = True
    fast_path = True
    has_evidence = True
    offers_text_mode = True

    def plan(self, inputs: Request, ranked, quote) -> Step:
        rt, question = inputs.rt, inputs.question.text
        ids = sorted(capped_slots(inputs))  # document order
        if not ids:
            return Step(text_plan(InProcessReader(rt.backbone), question, ""), [])
        paths = [path_indices(inputs.routing, i) for i in ids] if inputs.opts.hier_pos else None
        return Step(slots_plan(rt.backbone, rt.parts, question,
                               Slots(inputs.routing.memories[ids], paths), inputs.opts.gate), ids,
                    sources=tuple(routed_text(inputs.routing, inputs.trees, ids)))

    def gate(self, result, cited):
        if result.loops is None:
            return {}
        return {rid: [int(x) for x in result.loops[i].tolist()] for i, rid in enumerate(cited)}


# Prompt tokens around the slots (chat template, "Context:", the question's framing): room kept
# free of slots in the context window besides the question and the answer.
PROMPT_ROOM = 256


def capped_slots(inputs: Request) -> list[int]:
    """The selected nodes that get a slot (H2MT 3.4: one memory slot per selected node): all
    of them, or, past ``H2MT_MAX_MEMORY_SLOTS`` or what the context window holds besides the
    question and the answer, the best-scored ones. The walk keeps every level's winners, so a
    wide route would otherwise prefill one slot per node of the library."""
    route, rt = inputs.route, inputs.rt
    room = (InProcessReader(rt.backbone).context_window() - inputs.opts.max_new_tokens
            - PROMPT_ROOM - len(rt.backbone.encode(inputs.question.text)))
    cap = max(1, min(rt.settings.max_memory_slots, room))
    selected = list(route.selected)
    if len(selected) <= cap:
        return selected
    return sorted(selected, key=lambda i: -(route.scores.get(i) or float("-inf")))[:cap]
