"""``memory``: H2MT. The selected nodes' memories as slots in the prompt (``prompts.slots_plan``).
It reads no text, so its answer is checked against the routed sections' text."""
from __future__ import annotations

from engine.answer.passages.sections import routed_text
from engine.answer.modes.base import Mode, ModeInputs, Step
from engine.answer.generation.prompts import path_indices, slots_plan, text_plan
from engine.answer.generation.reader import InProcessReader


class MemoryMode(Mode):
    name = "memory"
    help = "fast: answers from the sections' memory vectors (H2MT), less reliable"
    needs_memories = True
    fast_path = True
    has_evidence = True
    offers_text_mode = True

    def plan(self, inputs: ModeInputs, ranked, quote) -> Step:
        rt, question = inputs.rt, inputs.question
        ids = sorted(inputs.route.selected)  # document order
        if not ids:
            return Step(text_plan(InProcessReader(rt.backbone), question, ""), [])
        paths = [path_indices(inputs.routing, i) for i in ids] if inputs.opts.hier_pos else None
        return Step(slots_plan(rt.backbone, rt.parts, question, inputs.routing.memories[ids],
                               paths, inputs.opts.gate), ids,
                    sources=tuple(routed_text(inputs.routing, inputs.trees, ids)))

    def gate(self, result, cited):
        if result.loops is None:
            return {}
        return {rid: [int(x) for x in result.loops[i].tolist()] for i, rid in enumerate(cited)}
