"""``full``: the manual's text in document order up to the reader's context window (the plain
baseline); it reads no route (it routes for its quote only)."""
from __future__ import annotations

from engine.answer.context import context_window
from engine.answer.modes.base import Mode, ModeInputs, Step
from engine.answer.prompts import TEXT_PROMPTS, text_plan


class FullMode(Mode):
    name = "full"
    help = "reads the manual from the start, as much as fits (no routing)"
    needs_reader = True
    shows_route = False
    trims_loops = True

    def plan(self, inputs: ModeInputs, ranked, quote) -> Step:
        model, question = inputs.reader, inputs.question
        room = context_window(model) - inputs.opts.max_new_tokens - 200 - len(model.encode(question))
        texts, used = [], 0
        for tree in inputs.trees.values():
            for n in tree.preorder():
                t = n.local_text
                if not t.strip():
                    continue
                ids = model.encode(t)
                if used + len(ids) > room:
                    ids = ids[: max(0, room - used)]
                    t = model.decode(ids)
                if not ids:
                    break
                texts.append(t)
                used += len(ids)
            if used >= room:
                break
        return Step(text_plan(model, question, "\n\n".join(texts),
                              TEXT_PROMPTS[inputs.opts.text_prompt]), [])
