"""``flat``: HMT-style: fixed-length segments of the manual, one memory each from the same
writer, memory search by the same scaled dot-product over all segment memories, no tree
(``engine.memory.flat``); as many segments as the route selected nodes."""
from __future__ import annotations

from engine.memory.flat import flat_index, search
from engine.answer.modes.base import Mode, Step
from engine.answer.request import Request
from engine.answer.generation.prompts import Slots, slots_plan
from engine.answer.modes.memory import capped_slots


class FlatMode(Mode):
    name = "flat"
    help = "baseline: fixed-length pieces, one memory each, no tree"
    label = "Baseline (no tree)"
    needs_memories = True
    needs_query_vector = True
    one_document = "the flat baseline answers about one document at a time"
    fast_path = True
    offers_text_mode = True

    def plan(self, inputs: Request, ranked, quote) -> Step:
        rt, doc_id = inputs.rt, inputs.doc_ids[0]
        index = flat_index(rt, doc_id, inputs.trees[doc_id], inputs.opts.flat_segment_tokens)
        seg, _ = search(index, inputs.question.vector, rt.parts.router,
                        max(1, len(capped_slots(inputs))))
        return Step(slots_plan(rt.backbone, rt.parts, inputs.question.text,
                               Slots(index.memories[seg]), inputs.opts.gate), [],
                    sources=tuple(index.texts[i] for i in seg))  # the segments' text
