"""engine.answer.question: an ask reads its question once (its words and its type), and every
stage after it (routing, passages, the mode, the check) takes that one object."""
from __future__ import annotations

import pytest

import engine.answer.question as question_module
from engine.answer.passages.answer_type import HOWTO, OPTION
from engine.answer.question import Question
from engine.ask import AskOptions, ask
from engine.routing import lexical
from tests.support.runtime import tiny_rt  # noqa: F401 (the widgets manual on a tiny Llama)


def test_a_question_is_read_once_into_its_words_and_its_type():
    q = Question.read("How do I mount the widget on a wall?")
    assert q.tokens == tuple(lexical.tokenize(q.text)) and q.kind == HOWTO
    assert Question.read("Which option sets the fuse?").kind == OPTION
    assert not q.matter and Question.read("What does the glossary say?").matter
    assert q.dense is None and q.vector is None
    encoded = q.encoded("dense", "vector")
    assert (encoded.dense, encoded.vector, encoded.tokens) == ("dense", "vector", q.tokens)


@pytest.mark.parametrize("mode", ["quote", "text"])
def test_one_ask_tokenises_and_types_its_question_once(tiny_rt, monkeypatch, mode):
    rt, doc = tiny_rt
    text = "Which supply do large widgets need?"
    calls = {"tokenize": 0, "type": 0}
    tokenize, question_type = lexical.tokenize, question_module.question_type

    def counted_tokenize(s, *a, **k):
        calls["tokenize"] += s == text
        return tokenize(s, *a, **k)

    def counted_type(s):
        calls["type"] += s == text
        return question_type(s)

    monkeypatch.setattr(lexical, "tokenize", counted_tokenize)
    monkeypatch.setattr(question_module, "question_type", counted_type)
    answer = ask(rt, doc, text, AskOptions(mode=mode, k=2, max_new_tokens=4), log=False)
    assert answer.quote is not None or answer.not_covered
    assert calls == {"tokenize": 1, "type": 1}
