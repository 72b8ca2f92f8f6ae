"""The key line (engine.answer.checks.key_line) on the real etoolbox manual: the line that answers,
verbatim from the manual's units, with its page; none for a question that asks for no line."""
from __future__ import annotations

import pytest

from engine.answer.checks import key_line
from engine.answer.passages import quote as quoting
from engine.answer.passages import sentences as S
from engine.answer.question import Question


@pytest.fixture(scope="module")
def encoder():
    from engine.routing.dense import load_encoder

    return load_encoder("cpu")


@pytest.fixture(scope="module")
def etoolbox(corpus_tree):
    tree = corpus_tree("etoolbox-manual.pdf")
    return [S.SectionText(rid=n.id, doc_id=1, node_id=n.id, heading=n.title or "",
                          body=n.text, page_start=n.page_start, page_end=n.page_end)
            for n in tree.preorder() if n.text and n.text.strip()]


def line_for(encoder, sections, question, answer=""):
    asked = Question.read(question)
    ranked = S.score(encoder, asked, S.candidates(sections))
    shown = S.select(ranked, lambda t: len(t.split()) * 2)
    quote = quoting.choose(ranked)
    return key_line.choose(asked, key_line.Shown(ranked, shown, quote), answer), ranked


def test_how_do_i_patch_a_command_gives_the_patchcmd_line_and_its_page(encoder, etoolbox):
    key, ranked = line_for(encoder, etoolbox, "How do I patch a command?")
    assert key is not None and key.text.lstrip().startswith("\\patchcmd")
    assert key.term == "\\patchcmd"
    # verbatim: the line is a line of one of the manual's units, on that unit's page
    unit = next(s for s in ranked if key.text in s.text.split("\n"))
    assert key.page == unit.page_start and key.page is not None


def test_an_option_question_gets_an_option_line(encoder, etoolbox):
    key, ranked = line_for(encoder, etoolbox,
                           "Which command appends code to a hook?")
    assert key is not None and any(key.text in s.text for s in ranked)
    assert key.term.startswith("\\")


def test_a_question_asking_for_no_line_gets_none(encoder, etoolbox):
    assert key_line.wanted(Question.read("What is etoolbox?")) is None
    key, _ = line_for(encoder, etoolbox, "What is etoolbox?")
    assert key is None


@pytest.mark.parametrize("question,kind", [
    ("Which option makes nano show line numbers?", key_line.OPTION),
    ("How do I install the package?", key_line.COMMAND),
    ("What is the default tab width?", key_line.VALUE),
    ("Which file holds the settings?", key_line.FILE),
    ("What is the syntax of \\ifdef?", key_line.SYNTAX),
])
def test_what_a_question_wants(question, kind):
    assert key_line.wanted(Question.read(question)) == kind
