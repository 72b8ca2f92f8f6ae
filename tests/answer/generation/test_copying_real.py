"""Copy-constrained decoding end to end: the bundled reader asked name questions on the etoolbox
manual in text mode (through the generation worker, as the product asks), with
``AskOptions.copy_names`` and without. Each constrained answer is a span of the manual's lines
its context gave (one line, after detokenisation); the free answer to the same prompt is not
(so the check can fail); a question that asks for no name is decoded freely either way."""
from __future__ import annotations

import pytest

from engine.answer.passages.answer_type import NAME_TYPES, question_type
from engine.answer.passages.sections import block_bodies
from engine.ask import AskOptions, ask
from tests.conftest import ETOOLBOX_TEXT

pytestmark = [pytest.mark.real_model, pytest.mark.xdist_group(ETOOLBOX_TEXT)]

NAME_QUESTION = "How do I patch a command?"
OTHER = "What is etoolbox?"
TOKENS = 48  # enough for the copied line and for the free answer to leave the manual's words


def test_a_copied_answer_is_a_span_of_the_passages(etoolbox_text):
    rt, doc = etoolbox_text

    def text(q: str, copy: bool):
        return ask(rt, doc, q, AskOptions(mode="text", copy_names=copy, max_new_tokens=TOKENS),
                   log=False)

    assert question_type(NAME_QUESTION) in NAME_TYPES
    copied, free = text(NAME_QUESTION, True), text(NAME_QUESTION, False)
    assert copied.sources == free.sources  # the same prompt
    lines = block_bodies(copied.sources[0]).split("\n")
    assert copied.stop == "eos" and copied.text.strip(), copied.text
    assert any(copied.text in line for line in lines), copied.text
    assert not any(free.text in line for line in lines), free.text
    assert question_type(OTHER) not in NAME_TYPES
    assert text(OTHER, True).text == text(OTHER, False).text
