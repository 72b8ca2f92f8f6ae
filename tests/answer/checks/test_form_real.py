"""The answer's form end to end: the bundled reader asked on the etoolbox manual, its answer
folded when a limit cuts a name short, and a question it adds after its answer trimmed off."""
from __future__ import annotations

import pytest

from engine.ask import AskOptions, ask
from engine.ingest import ingest_file
from tests.support.runtime import make_runtime

pytestmark = pytest.mark.real_model


def test_the_real_reader_s_cut_answer_is_folded_and_its_added_question_trimmed(
        real_backbone, shared_dir, tmp_path):
    rt = make_runtime(real_backbone, tmp_path)
    doc = ingest_file(shared_dir / "corpus" / "etoolbox-manual.pdf", rt, memories=False).doc_id
    # 22 tokens end inside the command's name: "... The `\patchcmd" (tests/answer/checks/
    # test_form.py, PATCH_22)
    cut = ask(rt, doc, "How do I patch a command?", AskOptions(mode="text", max_new_tokens=22),
              log=False)
    assert cut.stop == "length" and cut.folded and cut.form.fault == "cut", cut.text
    assert cut.fold_line.startswith("The model's answer was cut off inside code at its 22-token")
    out = cut.as_json()
    assert out["folded"] and out["form"]["fault"] == "cut"
    # the example question's answer ends with a question of the model's own (LOOP_LIST)
    looped = ask(rt, doc, "How do I loop over a comma-separated list?",
                 AskOptions(mode="text", max_new_tokens=128), log=False)
    assert "\\forcsvlist" in looped.text and "Question:" not in looped.text, looped.text
    assert looped.form.note is not None and looped.form.note in (looped.warning or "")
    assert looped.form.fault is None
