"""Copy-constrained decoding (engine.answer.generation.copying): the span rule on token ids, and
on a tiny random Llama through the generation worker (per-row processors, decoded together)
and through ``generate``: every constrained output is a span of the source, the same both ways,
where the free outputs are not."""
from __future__ import annotations

import torch

from engine.answer.generation.copying import SpanIndex, copy_processor, span_index
from engine.answer.generation.decoding import Decoding, Plan, generate
from engine.answer.generation.prompts import chat_parts, embed_text
from engine.serving.request import GenerationRequest
from engine.serving.worker import GenerationWorker

END, NL = 0, 9
SOURCE = [5, 6, 7, NL, 5, 8, 6, 7, 7]


def allowed(index: SpanIndex, written: list[int]) -> list[int]:
    return index.allowed(0, torch.tensor(written, dtype=torch.long))


def test_a_span_goes_on_as_the_source_does_and_ends_at_a_line_or_the_cap():
    index = SpanIndex(SOURCE, frozenset({END}), frozenset({NL}), cap=3)
    assert allowed(index, []) == [5, 6, 7, 8]  # any start, never a line break, never an end
    assert allowed(index, [5]) == [END, 6, 8]  # 5 6 ... and 5 8 ...
    assert allowed(index, [5, 6]) == [END, 7]
    assert allowed(index, [6, 7]) == [END, 7]  # "6 7" then the line break (an end) or 7
    assert allowed(index, [5, 6, 7]) == [END]  # the cap
    assert allowed(index, [7, 7]) == [END]  # the source's end
    assert index.holds([5, 8, 6, END]) and not index.holds([5, 7]) and not index.holds([7, NL])
    assert not index.holds([END])


def test_the_source_is_read_in_the_tokenizer_s_ids(real_tokenizer):
    text = "[1] Patching (p. 13):\n\\patchcmd[<prefix>]{<command>} patches a command."
    index = span_index(real_tokenizer, text, frozenset({real_tokenizer.eos_token_id}))
    # the ids as the source holds them: "\\patchcmd[<prefix>" is one (its "]" is the source's
    # "]{"), " patches a command" another
    for span in ("\\patchcmd[<prefix>", " patches a command"):
        assert index.holds(real_tokenizer.encode(span, add_special_tokens=False)), span
    assert not index.holds(real_tokenizer.encode("\\patchcmd[<prefix>]", add_special_tokens=False))
    assert not index.holds(real_tokenizer.encode("\\apptocmd", add_special_tokens=False))
    assert index.breaks and all("\n" in real_tokenizer.decode([t]) for t in index.breaks)


def test_a_span_neither_starts_nor_ends_inside_a_character(real_tokenizer):
    """"⟨" is three byte tokens: a span ends after all three, past the cap if it must."""
    text = "\\do{⟨item⟩} ends"
    end = real_tokenizer.eos_token_id
    index = span_index(real_tokenizer, text, frozenset({end}), cap=4)
    ids = index.source
    lt = [i for i, t in enumerate(ids) if real_tokenizer.decode(ids[:i + 1]).endswith("⟨")][0]
    assert real_tokenizer.decode(ids[:lt - 1]).endswith("\ufffd")  # "⟨" in parts
    assert allowed(index, ids[:lt - 1]) == [ids[lt - 1]]  # the cap passed, no end yet
    assert allowed(index, ids[:lt + 1]) == [end]  # whole again: the cap holds
    assert ids[lt] not in index.first and ids[lt - 2] in index.first
    assert not index.holds(ids[:lt - 1]) and index.holds(ids[:lt + 1])


def test_the_worker_decodes_copied_spans_as_generate_does(tiny_backbone):
    bb = tiny_backbone
    source = ("[1] Patching (p. 13):\n\\patchcmd[<prefix>]{<command>}{<search>}{<replace>} "
              "extracts the code of a command and replaces search with replace.\n"
              "\\apptocmd{<command>}{<code>} appends code to a command.")
    ends = frozenset({bb.tokenizer.eos_token_id})
    index = span_index(bb.tokenizer, source, ends)
    prompts = [embed_text(bb, chat_parts(bb, q)[0]) for q in
               ("How do I patch a command?", "Which command appends code?", "Why?")]
    free = [generate(Plan(bb, [p]), Decoding(max_new_tokens=12, guard=False)) for p in prompts]
    assert not any(source.find(r.text) >= 0 and r.text for r in free)  # the test can fail
    worker = GenerationWorker(bb.model, max_batch=4)
    try:
        tickets = [worker.submit(GenerationRequest(
            inputs_embeds=p, max_new_tokens=40, eos_token_ids=ends,
            logits_processor=[copy_processor(index)])) for p in prompts]
        outcomes = [t.result(timeout=120) for t in tickets]
    finally:
        worker.close()
    for p, outcome in zip(prompts, outcomes):
        assert index.holds(outcome.tokens), bb.tokenizer.decode(outcome.tokens)
        assert outcome.stop == "eos" and outcome.tokens[-1] in ends
        text = bb.tokenizer.decode(outcome.tokens, skip_special_tokens=True)
        assert text.strip() and text in source
        alone = generate(Plan(bb, [p]), Decoding(max_new_tokens=40, guard=False,
                                                    copy_from=source))
        assert alone.text == text.strip()
