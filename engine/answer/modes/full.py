"""``full``: the manual's text in document order up to the reader's context window (the plain
baseline); it reads no route (it routes for its quote only)."""
from __future__ import annotations

from engine.answer.modes.base import Mode, Step
from engine.answer.request import Request
from engine.answer.generation.prompts import TEXT_PROMPTS, text_plan


class FullMode(Mode):
    name = "full"
    help = "reads the manual from the start, as much as fits (no routing)"
    label = "Read from the start"
    needs_reader = True
    shows_route = False
    trims_loops = True
    offers_text_mode = True

    def plan(self, inputs: Request, ranked, quote) -> Step:
        model, question = inputs.reader, inputs.question.text
        room = model.context_window() - inputs.opts.max_new_tokens - 200 - len(model.encode(question))
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
        context = "\n\n".join(texts)
        return Step(text_plan(model, question, context, TEXT_PROMPTS[inputs.opts.text_prompt]), [],
                    sources=(context,))
