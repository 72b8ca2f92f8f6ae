"""The short answer (engine.answer.passages.short_answer): the terms a passage holds, the shipped
scorer on real etoolbox passages, and what is never given."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.answer.passages import short_answer as sa
from engine.answer.passages.quote import Quote
from engine.answer.question import Question
from tests.conftest import ETOOLBOX_TEXT

PATCH = ("\\patchcmd[⟨prefix⟩]{⟨command⟩}{⟨search⟩}{⟨replace⟩}{⟨success⟩}{⟨failure⟩}\n"
         "This command extracts the replacement text of a ⟨command⟩, replaces ⟨search⟩with "
         "⟨replace⟩, and reassembles the ⟨command⟩.")
PRETOCMD = ("\\pretocmd{⟨command⟩}{⟨code⟩}{⟨success⟩}{⟨failure⟩}\n"
            "This command is similar to \\patchcmd except that it inserts ⟨code⟩at the beginning "
            "of the replacement text of ⟨command⟩.")


@pytest.fixture(scope="module")
def encoder():
    from engine.routing.dense import load_encoder

    return load_encoder("cpu")


def quote(text: str, page: int = 13) -> Quote:
    return Quote(text=text, doc_id=1, node_id=1, heading="Patching", page=page, score=1.0,
                 rid=1, channel="routed section")


def test_terms_by_their_form_and_a_signature_s_head():
    text = ("$ zmv '(*).lis' '$1.txt'\nUse --keep-labels or glp_term_out(GLP_OFF); see "
            "Mesh.Algorithm, ~/.ssh/config, KeepTogether, spaceBefore, [fragile] and .gmsh-options.")
    found = {t.term: t.form for t in sa.terms([quote(PATCH), quote(text)])}
    assert found["\\patchcmd"] == "head" and found["zmv"] == "head"
    assert found["--keep-labels"] == "option" and found["glp_term_out"] == "call"
    assert found["GLP_OFF"] == "snake" and found["Mesh.Algorithm"] == "dotted"
    assert found["~/.ssh/config"] == "path" and found[".gmsh-options"] == "path"
    assert found["KeepTogether"] == found["spaceBefore"] == "camel"
    assert found["fragile"] == "bracket"
    assert "This" not in found and "command" not in found  # prose words are no terms


def test_the_shipped_scorer_ranks_the_entry_s_name_first_for_a_name_question(encoder):
    from dataclasses import replace

    shipped = sa.TermScorer.load()
    assert shipped is not None, "assets/short_answer.json is shipped"
    scorer = replace(shipped, threshold=0.0)  # its pick, however unsure (the bar is its own)
    passages = [quote(PATCH), quote(PRETOCMD, 14)]
    got = sa.short_answer(Question.read("Which command patches a command's replacement text?"), passages, scorer,
                          encoder)
    assert got is not None and got.term == "\\patchcmd" and got.page == 13
    assert got.text.startswith("\\patchcmd[") and 0 < got.score <= 1
    assert got.as_json()["term"] == "\\patchcmd"


def test_no_short_answer_for_a_why_question_no_scorer_or_no_term():
    scorer = sa.TermScorer.load()
    passages = [quote(PATCH)]
    assert sa.short_answer(Question.read("Why does patching fail for my command?"), passages, scorer,
                           None) is None
    assert sa.short_answer(Question.read("Which command patches a command?"), passages, None, None) is None
    prose = [quote("The manual is written for people who use it every day.")]
    assert sa.short_answer(Question.read("Which command patches a command?"), prose, scorer, None) is None


def test_a_scorer_fitted_on_other_features_is_refused(tmp_path):
    d = json.loads(sa.ASSET.read_text())
    d["features"] = d["features"][:-1]
    bad = tmp_path / "short_answer.json"
    bad.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="refit"):
        sa.TermScorer.load(bad)
    assert sa.TermScorer.load(tmp_path / "missing.json") is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("abcXYZ_-./\\[]{}()$~ \n")), max_size=80),
                min_size=1, max_size=3),
       st.sampled_from(["Which option sets it?", "How do I do it?", "What is the command?"]))
def test_a_short_answer_is_always_a_term_the_passages_hold(encoder, texts, question):
    passages = [quote(t) for t in texts]
    n = len(sa.FEATURES)
    always = sa.TermScorer(names=sa.FEATURES, mean=np.zeros(n), scale=np.ones(n),
                           coef=np.zeros(n), intercept=5.0, threshold=0.5)
    got = sa.short_answer(Question.read(question), passages, always, encoder)  # any term at all is given
    if got is not None:
        assert any(got.term in p.text and got.text in p.text for p in passages)


@pytest.mark.real_model
@pytest.mark.xdist_group(ETOOLBOX_TEXT)
def test_an_ask_gives_the_short_answer_in_its_json_when_turned_on(etoolbox_text, monkeypatch):
    """Quote mode on etoolbox: off by default, the JSON's short_answer is null; with a scorer
    (the shipped one, its bar lowered so it always answers) it is a term of the passages shown,
    with its line and the page of its passage."""
    from dataclasses import replace

    from engine.ask import AskOptions, ask

    rt, doc = etoolbox_text
    q, opts = "How do I patch a command?", AskOptions(mode="quote")
    assert ask(rt, doc, q, opts, log=False).as_json()["short_answer"] is None
    # the runtime is shared: its scorer is given back after the test
    monkeypatch.setitem(rt.cache, "short_answer", replace(sa.TermScorer.load(), threshold=0.0))
    a = ask(rt, doc, q, opts, log=False)
    short = a.as_json()["short_answer"]
    assert short is not None and set(short) == {"term", "text", "page", "page_label", "score"}
    holding = [p for p in a.passages.shown if short["term"] in p.text and short["text"] in p.text]
    assert holding and short["page"] == holding[0].page, (short, a.passages)
