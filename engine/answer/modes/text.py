"""``text``: the reader reads the best sentences of the routed sections (``engine.answer.passages.sentences``,
RECOMP-style extractive compression), in document order under their heading paths and pages,
within a small token budget; with no sentence above the threshold it answers without context.
``AskOptions.text_packing = "sections"`` keeps the earlier packing (the selected nodes' whole
text, best routing score first, within ``text_budget``, ``context.pack_context``).
``AskOptions.copy_names``: a name question's answer is a span of the sentences given, their
headers left out (``engine.answer.generation.copying``)."""
from __future__ import annotations

from engine.answer.passages import sentences as sentence_evidence
from engine.answer.passages.answer_type import NAME_TYPES
from engine.answer.passages.sections import block_bodies, pack_context
from engine.answer.passages.grounding import quote_bar, sentence_pager
from engine.answer.modes.base import Mode, Step
from engine.answer.request import Request
from engine.answer.generation.prompts import TEXT_PROMPTS, text_plan

TEXT_PACKINGS = ("sentences", "sections")
NO_PASSAGE = ("No passage of the manual matched the question closely enough: this answer is the "
              "model's own, without the manual.")


class TextMode(Mode):
    name = "text"
    help = "answers from the selected sections' text, with pages (the default)"
    label = "Answer from the text"
    needs_reader = True
    quote_first = True  # the reader reads the ranked sentences
    trims_loops = True
    has_evidence = True

    def plan(self, inputs: Request, ranked, quote) -> Step:
        opts, model = inputs.opts, inputs.reader
        system = TEXT_PROMPTS[opts.text_prompt]
        if opts.text_packing == "sections":
            context, cited = pack_context(inputs.trees, inputs.route, model.encode,
                                          opts.text_budget, opts.text_sections)
            return Step(text_plan(model, inputs.question.text, context, system), cited,
                        sources=(context,))
        kept = sentence_evidence.select(ranked, lambda t: len(model.encode(t)),
                                        opts.sentence_budget,
                                        quote_bar(inputs.rt, opts.quote_threshold))
        context = sentence_evidence.context_text(kept, sentence_pager(inputs.rt))
        cited = list(dict.fromkeys(s.rid for s in kept))
        # a name question's answer copies a span of the manual's lines (the headers left out)
        copied = (block_bodies(context).strip()
                  if opts.copy_names and inputs.question.kind in NAME_TYPES else "")
        return Step(text_plan(model, inputs.question.text, context, system), cited,
                    None if kept else NO_PASSAGE, sources=(context,),
                    copy_from=copied or None)

    def keeps_evidence(self, reason):
        # a text answer that began to loop may still be right up to there: it keeps its evidence
        return reason in (None, "repeat")
