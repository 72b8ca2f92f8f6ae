"""The command line's reader flags: checked with the environment, one line and exit status 2
before anything is loaded; a flag wins over the environment."""
from __future__ import annotations

import argparse

import pytest

from engine.cli import _settings, main


@pytest.fixture
def no_reader_env(monkeypatch):
    for name in ("H2MT_READER", "H2MT_READER_MODEL", "H2MT_READER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("argv, says", [
    (["--reader", "http://127.0.0.1:9/v1"], "set H2MT_READER_MODEL"),
    (["--reader", "http://127.0.0.1:9", "--reader-model", "m"], "ends in /v1"),
    (["--reader-model", "m"], "is not an http(s) URL"),
])
def test_bad_reader_flags_are_one_line(argv, says, no_reader_env, capsys):
    assert main(["ask", "1", "question?", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


def test_a_reader_flag_wins_over_the_environment(no_reader_env):
    no_reader_env.setenv("H2MT_READER", "http://gpu-box:8000/v1")
    no_reader_env.setenv("H2MT_READER_MODEL", "served")
    args = argparse.Namespace(reader="http://other:8000/v1", reader_model=None)
    s = _settings(args)
    assert (s.reader, s.reader_model) == ("http://other:8000/v1", "served")


def test_a_folded_answer_is_printed_under_its_line(no_reader_env, capsys):
    """``ask`` prints the line a folded answer is folded under just above the answer."""
    import engine.ask
    import engine.runtime
    from engine.answer.checks.form import read_form
    from engine.answer.response import Answer, Generation, Metrics
    from engine.answer.request import Passages
    from engine.answer.checks.review import Review

    form = read_form("The answer is:", "length", 4)  # a real 4-token answer (test_form.py)
    answer = Answer(text=form.text, mode="text", cited=[], metrics=Metrics(),
                    generation=Generation(form=form))
    no_reader_env.setattr(engine.runtime.Runtime, "load", classmethod(lambda cls, s: None))
    no_reader_env.setattr(engine.ask, "ask", lambda *a, **k: answer)
    assert main(["ask", "1", "Which command expands a macro once?"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["the model's reading of the passages:",
                       f"(not checked as right) {form.line}", "The answer is:"]


def test_the_three_passages_are_printed_as_the_screen_shows_them(no_reader_env, capsys):
    """``ask`` prints the quote and the two passages after it, each its signature first, then
    its heading and page, then its text; where the manual answers; no key line that is not a
    whole term of the quote's entry (issue 67)."""
    import engine.ask
    import engine.runtime
    from engine.answer.checks.key_line import KeyLine
    from engine.answer.passages.quote import Quote
    from engine.answer.response import Answer, Generation, Metrics
    from engine.answer.request import Passages
    from engine.answer.checks.review import Review

    def q(text, score, page):
        return Quote(text=text, doc_id=1, node_id=page, heading=f"Patching › part {page} of 4",
                     page=page, score=score, rid=page)

    passages = [q("\\patchcmd{<command>}{<search>}{<replace>}\nThis command patches a macro.",
                  1.40, 8), q("\\apptocmd{<command>}{<code>}\nAppends code.", 1.39, 9),
                q("Patching is fragile with arguments.", 1.0, 10)]
    answer = Answer(text="", mode="quote", cited=[], metrics=Metrics(),
                    passages=Passages(quote=passages[0], shown=tuple(passages)),
                    review=Review(key_line=KeyLine("l i n e . ”", None, "Patching", "”", False)))
    no_reader_env.setattr(engine.runtime.Runtime, "load", classmethod(lambda cls, s: None))
    no_reader_env.setattr(engine.ask, "ask", lambda *a, **k: answer)
    assert main(["ask", "1", "How do I patch a command?", "--mode", "quote"]) == 0
    out = capsys.readouterr().out
    assert "more than one candidate place" in out  # 1.40 against 1.39
    lines = out.splitlines()
    first = lines.index("1. \\patchcmd{<command>}{<search>}{<replace>}")
    assert lines[first + 1] == "   (Patching, p. 8)" and "patches a macro" in lines[first + 2]
    assert "2. \\apptocmd{<command>}{<code>}" in lines
    third = lines.index("3. (Patching, p. 10)")  # prose: no signature, where it is first
    assert lines[third + 1] == "   Patching is fragile with arguments."
    assert "from the manual" not in out  # the debris key line is not shown
