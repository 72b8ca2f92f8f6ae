"""engine.answer.passages.answer_type: what a question asks for, and whether a unit is that."""
from engine.answer.passages.answer_type import DEFINITION, HOWTO, OPTION, SYNTAX, fits, question_type


def test_question_types():
    assert question_type("How do I install Why3 with opam?") == HOWTO
    assert question_type("Which option makes ngspice run in batch mode?") == OPTION
    assert question_type("What is the syntax of \\patchcmd?") == SYNTAX
    assert question_type("What is IDL, in the sense camlidl uses the term?") == DEFINITION
    assert question_type("Why doesn't my PDF viewer show overprint?") is None


def test_units_that_fit():
    assert fits(HOWTO, "intro", "It is as simple as\nopam install why3")
    assert not fits(HOWTO, "sentence", "The simplest way to install Why3 is via Opam.")
    assert fits(OPTION, "line", "-b run in batch mode")
    assert fits(SYNTAX, "line", "\\patchcmd[prefix]{command}{search}{replace}")
    assert fits(DEFINITION, "sentence", "IDL stands for Interface Description Language.")
    assert not fits(None, "line", "opam install why3")
