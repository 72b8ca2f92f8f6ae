"""engine.answer.passages.rerank: the quote's second stage (issue 66), its setting and its
share of the answer's metrics."""
from __future__ import annotations

import numpy as np
import pytest

from engine.answer.passages import rerank, sentences
from engine.answer.passages.sentences import Sentence
from engine.ask import AskOptions, ask
from engine.settings import Settings, SettingsError
from engine.answer.question import Question
from tests.support.runtime import make_runtime, widgets_runtime  # noqa: F401


def _sent(i: int, score: float, text: str) -> Sentence:
    return Sentence(rid=0, doc_id=1, node_id=i, heading=f"Part > Section {i}", index=0,
                    text=text, page_start=1, page_end=1, order=i, score=score)


class Fixed:
    """A scorer that prefers the passage holding ``word`` (and counts its calls); ``top`` and
    ``weight``: its blend's, as a real scorer names them (None: the module's)."""

    def __init__(self, word: str, top: int | None = None, weight: float | None = None):
        self.word, self.calls = word, []
        if top is not None:
            self.top = top
        if weight is not None:
            self.weight = weight

    def scores(self, question, passages):
        self.calls.append(list(passages))
        return np.array([5.0 if self.word in p else 0.0 for p in passages]), 10 * len(passages)


def test_the_second_stage_reorders_only_the_best_candidates_above_the_bar():
    ranked = [_sent(0, 1.2, "alpha entry"), _sent(1, 1.1, "beta entry"),
              _sent(2, 1.0, "gamma entry"), _sent(3, 0.5, "delta below the bar")]
    scorer = Fixed("gamma", top=8, weight=2.0)
    done = rerank.rerank(scorer, Question.read("which?"), ranked, threshold=0.7)
    assert [s.text for s in done.ranked][:1] == ["gamma entry"] and done.reordered
    assert done.ranked[-1].text == "delta below the bar"  # below the bar: not re-read, in place
    assert len(scorer.calls[0]) == 3 and done.tokens == 30
    assert [s.score for s in ranked] == [1.2, 1.1, 1.0, 0.5]  # the linear scores are kept
    # weight 0: the linear order; top 1 or no scorer: nothing re-read
    q = Question.read("q")
    linear = rerank.rerank(Fixed("gamma", weight=0.0), q, ranked, 0.7)
    assert linear.ranked[0].text == "alpha entry"
    assert rerank.rerank(Fixed("gamma", top=1), q, ranked, 0.7).ranked == ranked
    assert rerank.rerank(None, q, ranked, 0.7).ranked == ranked


def test_the_blend_is_standardised_per_question():
    mixed = rerank.blend([3.0, 2.0, 1.0], [-10.0, -1.0, -10.0], 1.0)
    assert int(np.argmax(mixed)) == 1  # a clear likelihood winner beats a one-step linear lead
    assert np.allclose(rerank.blend([1.0, 1.0], [0.0, 0.0], 2.0), 0.0)


def test_the_setting_is_checked_and_off_by_default():
    assert Settings().quote_rerank == "none"
    assert Settings.from_env({"H2MT_QUOTE_RERANK": "likelihood"}).quote_rerank == "likelihood"
    with pytest.raises(SettingsError, match="H2MT_QUOTE_RERANK"):
        Settings(quote_rerank="bogus")


def test_the_query_likelihood_reads_the_question_after_each_entry(tiny_backbone):
    """One batched pass (left padding): a row's score does not depend on the other rows."""
    ql = rerank.QueryLikelihood(tiny_backbone.model, tiny_backbone.tokenizer, entry_tokens=12)
    texts = ["Large widgets need a 12 V supply and a long cable to the wall socket.",
             "Small widgets."]
    both, tokens = ql.scores("Which supply do large widgets need?", texts)
    alone, _ = ql.scores("Which supply do large widgets need?", texts[1:])
    assert both.shape == (2,) and np.all(both < 0) and np.isclose(both[1], alone[0], atol=1e-4)
    fixed = sum(len(ql.tok.encode(x, add_special_tokens=False))
                for x in (rerank.OPENING, rerank.PROMPT, "Which supply do large widgets need?"))
    longest = max(len(ql.tok.encode(t, add_special_tokens=False)[:12]) for t in texts)
    assert tokens == 2 * (longest + fixed)


def test_an_answer_carries_the_second_stages_share_of_the_quote_time(tiny_backbone, tmp_path):
    rt, doc = widgets_runtime(tiny_backbone, tmp_path)
    q = "Which supply do large widgets need?"
    off = ask(rt, doc, q, AskOptions(mode="quote"), log=False)
    assert off.metrics.rerank_ms == 0.0 and off.metrics.rerank_tokens == 0
    rt.settings = rt.settings.with_(quote_rerank="likelihood")
    on = ask(rt, doc, q, AskOptions(mode="quote"), log=False)
    m = on.metrics
    assert 0.0 < m.rerank_ms <= m.quote_ms and m.rerank_tokens > 0
    # the measured work is bounded: at most TOP rows of an entry cut, the prompt and the question
    per_row = rerank.ENTRY_TOKENS + sum(len(rt.backbone.tokenizer.encode(x))
                                        for x in (rerank.OPENING, rerank.PROMPT, q))
    assert m.rerank_tokens <= rerank.TOP * per_row
    assert on.quote is not None
    # with the entry inventory too (a name question): the whole manual's entries are read
    rt.settings = rt.settings.with_(quote_inventory=True)
    named = ask(rt, doc, "How do I install a widget?", AskOptions(mode="quote"), log=False)
    assert named.quote is not None and named.metrics.rerank_tokens > 0


def test_the_second_stage_puts_the_entry_before_a_same_word_entry_on_a_big_manual(
        gmsh_tree, real_backbone):
    """Gmsh (390 pages): the linear score puts the command-line option that shares the
    question's words ("-setstring name value: Set constant or option string") before the one
    asked for; the backbone reading each candidate with the question, blended with the shipped
    weight (chosen held out by manual: docs/results.md), puts "-o file" first."""
    from bench.quote_time import stood_in_walk
    from engine.routing.dense import load_encoder

    q = "Which command-line option sets the name of the output file?"
    ranked = sentences.score(load_encoder("cpu"), Question.read(q),
                             sentences.candidates(stood_in_walk(gmsh_tree, 50)(q)))
    assert not ranked[0].text.startswith("-o file")
    assert any(s.text.startswith("-o file") for s in ranked[:rerank.TOP])
    scorer = rerank.QueryLikelihood(rerank.bfloat16_copy(real_backbone.model),
                                    real_backbone.tokenizer)
    done = rerank.rerank(scorer, Question.read(q), ranked, sentences.THRESHOLD)
    assert done.reordered and done.ranked[0].text.startswith("-o file")
    # the work is bounded: one pass over at most TOP rows of ENTRY_TOKENS + prompt + question
    tok = real_backbone.tokenizer
    per_row = rerank.ENTRY_TOKENS + sum(len(tok.encode(x))
                                        for x in (rerank.OPENING, rerank.PROMPT, q))
    assert 0 < done.tokens <= rerank.TOP * per_row
    assert done.ms < 60_000  # generous: about 1.5-2.5 s on a loaded 2-core CPU (docs/results.md)
