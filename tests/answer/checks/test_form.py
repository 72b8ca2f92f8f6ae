"""The answer's form (engine/answer/checks/form.py): what folds an answer whatever its score,
each case on an answer the bundled reader really wrote.

Every answer below was produced once by SmolLM2-135M-Instruct, the bundled reader: text mode
(one memory mode, said there), default options, ``max_new_tokens`` as noted, ``engine.ask.ask``
on a corpus PDF (../shared/corpus) ingested phase one only (``ingest_file(...,
memories=False)``), the text recorded as it reached ``read_form`` (after the loop clean-up),
with its stop and its generated tokens (None where they were not recorded). The end-to-end
test asks the real model again.
"""
from __future__ import annotations

import pytest

from engine.answer.checks.check import check_answer, unsupported_terms
from engine.answer.checks.form import read_form, repeated_sentence, trim_leak, whole_sentences
from engine.answer.response import Answer, Generation, Metrics
from engine.answer.checks.review import Review
from engine.answer.question import Question

# etoolbox, "How do I patch a command?", max_new_tokens=22: the product's first example stopped
# at its token cap inside the command's name.
PATCH_22 = ("To patch a command, you need to use the `\\patchcmd` command. The `\\patchcmd",
            "length", 22)
# etoolbox, "How do I append code to a macro?", 128 tokens: the repetition stop fired inside
# the example's code block, and the loop clean-up kept the block open.
APPEND = ("To append code to a macro, you can use the \\gappto command. This command is a drop-in "
          "replacement for the \\g@addto@macro command in the LaTeX kernel.\n\nHere's an example:"
          "\n\n```\n# Macros", "repeat", None)
# etoolbox, "What is the difference between \newbool and \newtoggle?", 128 tokens: the
# repetition stop, mid-sentence.
DIFFERENCE = ("The main difference between \\newbool and \\newtoggle is that \\newbool is a macro "
              "that is used to create a new boolean flag, while \\newtoggle", "repeat", None)
# etoolbox, "How do I patch a command?", max_new_tokens=10: no sentence ended yet.
PATCH_10 = ("To patch a command, you need to use the", "length", 10)
# R's manual (r-intro.pdf), "How do I attach a data frame?", 128 tokens: the repetition stop
# inside an invented example.
ATTACH = ("To attach a data frame to a list, you can use the `attach()` function. The function "
          "takes a list of data frames as an argument, which is then passed to the `list()` "
          "function.\n\nHere's an example:\n\n```r\n# Using the attach() function\nlente = "
          "data.frame(list(lente$u, lente$v, lente$w))\nlente.list = lente.list.apply(list(), "
          "lambda x: x[x$u])\nlente.list.append(lente.list", "repeat", 120)
# etoolbox, "Which commands are for boolean flags?", 128 tokens: "p. 15" is no sentence's end.
BOOL_FLAGS = ("The commands that are for boolean flags are:\n\n- \\booltrue (p. 15)\n- \\boolfalse "
              "(p. 15)\n- \\bool", "repeat", None)
# etoolbox, "How do I patch a command?", max_new_tokens=23: the name is whole, the sentence not.
PATCH_23 = ("To patch a command, you need to use the `\\patchcmd` command. The `\\patchcmd`",
            "length", 23)
# etoolbox, "How do I loop over a comma-separated list?" (an example question), 128 tokens: a
# question of its own after the answer.
LOOP_LIST = ("To loop over a comma-separated list, you can use the \\forcsvlist command. Here's "
             "how:\n\n\\forcsvlist{item1, item2, item3}\n\nThis will print the items in the "
             "list.\n\nQuestion: How do I use a for loop to loop over a comma-separated list?",
             "eos", None)
# camlidl, "Which attribute gives the length of an array?", 128 tokens.
LENGTH_IS = ("The length_is attribute is used to determine the length of an array.\n\nQuestion: "
             "Which attribute gives the length of an array?", "eos", 29)
# etoolbox, "What is the version of etoolbox?", 128 tokens: a passage's header of the prompt.
VERSION = ("The etoolbox package is a toolset of programming tools geared primarily towards LaTeX "
           "class and package authors.\n\n[3] How to use etoolbox (p. 41):", "loop", 56)
# etoolbox, "List the commands to patch a macro.", 128 tokens: the prompt's header first.
LIST_PATCH = ("1. [1] Hook Management (p. 10):\nThe hook management is a simple command that can "
              "be used to create a hook.", "repeat", 68)
# camlidl, "What is the default pointer kind?", memory mode (the manual ingested with its
# memories), 128 tokens: a question of its own and nothing else.
PROMPT_ONLY = ("Question: What is the difference between the best and the best?", "eos", None)
# etoolbox, "What are the steps to debug a patch?", 128 tokens: names no passage holds.
DEBUG_PATCH = ("1. Run the command `pip install -r requirements.txt` to install the pip package.",
               "loop", 40)
# etoolbox, "Which command expands a macro once?", 128 tokens: a preamble with its content;
# with max_new_tokens=4, the opening words alone.
EXPANDS = ("The answer is: \\csuse.", "eos", 9)
EXPANDS_4 = ("The answer is:", "length", 4)
# beamer's user guide, "Which option hides the navigation symbols?", 128 tokens.
NAVIGATION = ("The answer is: [vertical]\n\nThe answer is:", "repeat", None)
# R's manual, "How do I make a vector?", 128 tokens.
VECTOR = ("The answer to your question is:", "repeat", None)


def test_a_name_cut_off_by_the_token_cap_is_dropped_back_to_the_last_whole_sentence():
    form = read_form(*PATCH_22)
    assert form.fault is None and form.trimmed_off == "cut"
    assert form.text == "To patch a command, you need to use the `\\patchcmd` command."
    assert form.note == ("The model's answer was cut off at its 22-token limit; its unfinished "
                         "end (“The `\\patchcmd”) was dropped.")
    assert read_form(*PATCH_23).text == form.text  # the code span closed, the sentence not


def test_a_code_block_left_open_by_the_repetition_stop_is_dropped_with_its_preamble():
    form = read_form(*APPEND)
    assert form.fault is None and form.text.endswith("command in the LaTeX kernel.")
    assert form.note.startswith("The model's answer was cut off where it began to repeat "
                                "itself; its unfinished end (“Here's an example: ``` "
                                "# Macros”)")


def test_an_answer_cut_before_its_first_sentence_ended_is_folded():
    form = read_form(*DIFFERENCE)
    assert form.fault == "cut" and form.text == DIFFERENCE[0]
    assert form.line == ("The model's answer was cut off where it began to repeat itself, "
                         "before its first sentence ended.")
    form = read_form(*PATCH_10)
    assert form.fault == "cut" and form.line == (
        "The model's answer was cut off at its 10-token limit, before its first sentence ended.")
    listed = read_form(*BOOL_FLAGS)
    assert listed.fault == "cut" and listed.text == BOOL_FLAGS[0]
    inside = read_form("To patch a command, use `\\patch", "length", 9)
    assert inside.fault == "cut" and "cut off inside code at its 9-token limit" in inside.line


def test_an_unfinished_end_that_invents_names_is_kept_for_the_check_to_fold():
    passages = ("The attach() function takes a 'database' such as a list or data frame as its "
                "argument. Thus suppose lentils is a data frame with three variables lentils$u, "
                "lentils$v, lentils$w. The attach\n> attach(lentils)")

    def holds(part: str) -> bool:
        return not unsupported_terms(part, passages, cut=True)[0]

    form = read_form(*ATTACH, holds=holds)
    assert form.text == ATTACH[0] and form.fault is None and not form.trimmed
    asked = Question.read("How do I attach a data frame?")
    check = check_answer(form.text, [passages], asked, cut=True)
    assert check.flagged and "lente" in check.line
    assert read_form(*ATTACH).trimmed_off == "cut"  # without the passages: dropped back
    assert read_form(*PATCH_22, holds=lambda part: "patchcmd" in part).trimmed_off == "cut"


def test_a_sentence_ends_at_a_period_but_an_abbreviation_s():
    assert whole_sentences("Use the option -v. Then run") == "Use the option -v."
    assert whole_sentences("Use \\appto (p. 3), e.g. here. And") == "Use \\appto (p. 3), e.g. here."
    assert whole_sentences("See p. 15 and") == ""


def test_the_same_words_ended_by_the_model_are_not_cut():
    assert read_form(PATCH_22[0], "eos", 22).fault is None  # the model chose to end there
    assert read_form(PATCH_22[0], "eos", 22).trimmed_off is None


@pytest.mark.parametrize("case", [LOOP_LIST, LENGTH_IS])
def test_a_question_the_model_adds_after_its_answer_is_trimmed_and_said(case):
    form = read_form(*case)
    assert form.fault is None and "Question:" not in form.text
    assert form.text == case[0].split("\n\nQuestion:")[0]
    assert form.note.startswith("A line the model added after its answer (“Question: ")
    assert form.note.endswith("was cut: it repeats the prompt's form, not the manual.")


def test_a_passage_header_is_trimmed_and_a_prompt_line_with_nothing_before_it_folds():
    form = read_form(*VERSION)
    assert form.fault is None and form.text.endswith("class and package authors.")
    assert "[3] How to use etoolbox (p. 41):" in form.note
    alone = read_form(*PROMPT_ONLY)
    assert alone.fault == "leak" and alone.text == PROMPT_ONLY[0]
    assert alone.line.startswith("The model's answer gives nothing before a line copied from "
                                 "its own prompt (“Question: What is the difference")
    folded = read_form(*LIST_PATCH)  # nothing before the header but a list mark
    assert folded.fault == "leak"
    assert folded.line == ("The model's answer gives nothing before a line copied from its own "
                           "prompt (“1. [1] Hook Management (p. 10):”).")


def test_a_preamble_with_no_content_folds_and_one_with_content_does_not():
    assert read_form(*EXPANDS).fault is None
    for case in (EXPANDS_4, NAVIGATION):
        form = read_form(*case)
        assert form.fault == "preamble" and form.text == case[0]
        assert form.line == ("The model's answer gives nothing after its opening words (“The "
                             "answer is:”).")
    form = read_form(*VECTOR)
    assert form.fault == "preamble" and "(“The answer to your question is:”)" in form.line
    lone = read_form("1.", "eos", 2)
    assert lone.fault == "preamble" and "(“1.”)" in lone.line
    listed = read_form("To patch a command:\n\n1.", "eos", 9)  # a dangling list mark dropped
    assert listed.fault == "preamble" and "(“To patch a command:”)" in listed.line


def test_opening_words_after_whole_sentences_are_dropped_and_said():
    form = read_form("To append code, use \\appto. Here's an example:", "eos", 14)
    assert form.fault is None and form.text == "To append code, use \\appto."
    assert form.trimmed_off == "preamble" and form.note == (
        "The model's answer ended in opening words with nothing after them (“Here's an "
        "example:”); they were dropped.")


def test_a_sentence_said_twice_folds_the_answer():
    said = "The \\patchcmd command is used to patch a command."
    form = read_form(f"{said} It takes five arguments. {said}", "eos", 30)
    assert form.fault == "repeat" and form.line == (
        f"The model's answer says the same sentence twice (“{said}”).")
    assert repeated_sentence("Use it. Use it.") is None  # too short to count


def test_a_leading_answer_label_is_dropped_quietly():
    assert trim_leak("Answer: \\csuse expands a macro once.") == (
        "\\csuse expands a macro once.", None)


def test_a_name_the_passages_do_not_hold_folds_whatever_the_score():
    form = read_form(*DEBUG_PATCH)
    assert form.fault is None  # its form is an answer's; its names are not the manual's
    check = check_answer(form.text, ["To debug a patch, use \\tracingpatches."],
                         Question.read("What are the steps to debug a patch?"), "\\tracingpatches")
    ans = Answer(text=form.text, mode="text", cited=[], metrics=Metrics(),
                 review=Review(check=check), generation=Generation(form=form))
    assert ans.folded and ans.fold_line.startswith("The model's answer names pip")
    assert ans.as_json()["form"] == {"fault": None, "line": None, "note": None, "trimmed": None}


def test_the_form_s_line_comes_first_on_a_folded_answer():
    form = read_form(*DIFFERENCE)
    ans = Answer(text=form.text, mode="text", cited=[], metrics=Metrics(),
                 generation=Generation(form=form))
    assert ans.folded and ans.fold_line == form.line
    assert ans.as_json()["form"]["fault"] == "cut"
