"""The answer's form end to end: the bundled reader asked on the etoolbox manual; an answer cut
before its first sentence ended is folded, one cut after it is dropped back to that sentence,
and made-up words after an opening ("Here's an example:") are trimmed off, each said in one line."""
from __future__ import annotations

import pytest

from engine.ask import AskOptions, ask
from tests.conftest import ETOOLBOX_TEXT

pytestmark = [pytest.mark.real_model, pytest.mark.xdist_group(ETOOLBOX_TEXT)]

Q = "How do I patch a command?"


def test_the_real_reader_s_cut_answers_and_added_question(etoolbox_text):
    rt, doc = etoolbox_text

    def text(q: str, tokens: int):
        return ask(rt, doc, q, AskOptions(mode="text", max_new_tokens=tokens), log=False)

    # 10 tokens: "To patch a command, you need to use the" (test_form.py, PATCH_10)
    cut = text(Q, 10)
    assert cut.stop == "length" and cut.folded and cut.form.fault == "cut", cut.text
    assert cut.fold_line == ("The model's answer was cut off at its 10-token limit, before its "
                             "first sentence ended.")
    out = cut.as_json()
    assert out["folded"] and out["form"]["fault"] == "cut"
    # 22 tokens end inside the command's name, after a whole sentence (PATCH_22)
    dropped = text(Q, 22)
    assert dropped.form.trimmed_off == "cut" and dropped.form.fault is None, dropped.text
    assert dropped.text == "To patch a command, you need to use the `\\patchcmd` command."
    assert dropped.form.note in dropped.warning and not dropped.cut
    # the example question's answer goes on after its sentence into "Here's an example:" and a
    # made-up loop in another language, cut at the limit: dropped back to the sentence (the
    # reader's own question after the answer, LOOP_LIST, is test_form.py's recorded case)
    looped = text("How do I loop over a comma-separated list?", 128)
    assert looped.text == ("You can use the \\forcsvlist command to loop over a comma-separated "
                           "list."), looped.text
    assert looped.form.trimmed_off == "preamble" and looped.form.note in looped.warning
