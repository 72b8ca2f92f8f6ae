"""engine.answer.passages.unit_prior: a code line yields to the sentence that answers a how-to
question (issue 66, the unit within the section)."""
from __future__ import annotations

import pytest

from engine.answer.passages import sentences
from engine.answer.passages.answer_type import DEFINITION, HOWTO, OPTION, SYNTAX
from engine.answer.passages.unit_prior import CodePrior, shape_of
from engine.answer.question import Question

SECTION = sentences.SectionText(
    rid=1, doc_id=1, node_id=1, heading="Building > Linking with libraries",
    body=("You link a program with a library by listing it in the LIBS variable.\n\n"
          "Program('prog.c', LIBS=['foo'], LIBPATH='.')\n\n"
          "Libraries\n\n"
          "The library is searched for in the directories of LIBPATH."),
    page_start=1, page_end=1)


def test_the_shape_of_each_unit():
    units = sentences.candidates([SECTION])
    assert [shape_of(u) for u in units] == ["sentence", "code", "line", "sentence"]


def test_a_code_line_loses_the_weight_for_a_how_to_question():
    prior = CodePrior(0.05)
    assert prior.bonus(HOWTO, "code") == -0.05
    for shape in ("line", "sentence", "entry", "intro", "row"):
        assert prior.bonus(HOWTO, shape) == 0.0


@pytest.mark.parametrize("qkind", [OPTION, SYNTAX, DEFINITION, None])
def test_nothing_changes_for_another_question(qkind):
    """"Which option" and "what syntax" ask for such a line: it keeps its score."""
    for shape in ("code", "line", "sentence"):
        assert CodePrior(0.05).bonus(qkind, shape) == 0.0


def test_the_linear_score_takes_the_weight_off_code_lines_only():
    """Words alone (no encoder): the code line's score is the same but for ``code_weight``, the
    other units' are unchanged; a question that asks for no name changes nothing."""
    how = Question.read("How do I link my program with a library?")
    assert how.kind == HOWTO
    off = {u.text: u.score for u in sentences.score(None, how, sentences.candidates([SECTION]),
                                                    sentences.ScoreRule(code_weight=0.0))}
    on = {u.text: u.score for u in sentences.score(None, how, sentences.candidates([SECTION]),
                                                   sentences.ScoreRule(code_weight=0.3))}
    code = "Program('prog.c', LIBS=['foo'], LIBPATH='.')"
    assert on[code] == pytest.approx(off[code] - 0.3)
    assert {t: s for t, s in on.items() if t != code} == {t: s for t, s in off.items()
                                                          if t != code}
    what = Question.read("Which option sets LIBPATH?")
    assert what.kind == OPTION
    plain = [u.score for u in sentences.score(None, what, sentences.candidates([SECTION]),
                                              sentences.ScoreRule(code_weight=0.0))]
    prior = [u.score for u in sentences.score(None, what, sentences.candidates([SECTION]),
                                              sentences.ScoreRule(code_weight=0.3))]
    assert plain == prior


def test_the_setting_is_checked_and_off_by_default():
    from engine.settings import Settings, SettingsError

    assert Settings().quote_code_prior is False
    assert sentences.ScoreRule().code_weight == 0.0 < sentences.CODE_WEIGHT
    assert Settings.from_env({"H2MT_QUOTE_CODE_PRIOR": "1"}).quote_code_prior is True
    with pytest.raises(SettingsError, match="H2MT_QUOTE_CODE_PRIOR"):
        Settings.from_env({"H2MT_QUOTE_CODE_PRIOR": "perhaps"})


def test_the_prose_comes_before_a_code_line_on_a_big_manual(scons_tree):
    """The SCons user guide (351 pages), a dev-probe question: without the prior the linear
    score puts a line of the example's comment ("In our example, it copies the file.in file to
    the file.out file.)", read as code for its file names) before the sentence that names
    --debug=explain; with it the sentence comes first."""
    from bench.quote_time import stood_in_walk
    from engine.routing.dense import load_encoder

    q = Question.read("How can I find out why SCons keeps rebuilding a target every time?")
    walk = stood_in_walk(scons_tree, 50)(q.text)
    encoder = load_encoder("cpu")
    before = sentences.score(encoder, q, sentences.candidates(walk))
    assert shape_of(before[0]) == "code" and "--debug=explain" not in before[0].text
    after = sentences.score(encoder, q, sentences.candidates(walk),
                            sentences.ScoreRule(code_weight=sentences.CODE_WEIGHT))
    assert "--debug=explain" in after[0].text, after[0].text
    assert shape_of(after[0]) == "sentence"
