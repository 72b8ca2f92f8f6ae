"""engine.answer.passages.cross_encoder: the quote's cross-encoder (issue 66), its fitted
tensors over the bundled MiniLM, and the second stage with it on a real big manual."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from engine.answer.passages import cross_encoder, rerank, sentences
from engine.answer.question import Question
from engine.settings import Settings


@pytest.fixture(scope="module")
def cross():
    return cross_encoder.load()


def test_the_fitted_tensors_load_over_the_bundled_weights(cross, tmp_path):
    """The asset is small (top layers, pooler, head) and changes the bundled model; a file that
    does not fit it, or none, is refused."""
    assert cross_encoder.ASSET.stat().st_size < 10 * 2**20
    state = cross.model.state_dict()
    assert state["classifier.weight"].shape == (1, 384)
    bad = tmp_path / "bad.safetensors"
    save_file({"classifier.weight": torch.zeros(2, 384)}, str(bad))
    with pytest.raises(ValueError, match="does not fit"):
        cross_encoder.load(bad)
    with pytest.raises(FileNotFoundError):
        cross_encoder.load(tmp_path / "none.safetensors")


def test_one_batched_pass_scores_each_entry_on_its_own(cross):
    q = "How do I list one file per line?"
    texts = ["-1 list one file per line", "-k, --kibibytes default to 1024-byte blocks",
             "--author with -l, print the author of each file"]
    both, positions = cross.scores(q, texts)
    alone, _ = cross.scores(q, texts[:1])
    assert both.shape == (3,) and np.isclose(both[0], alone[0], atol=1e-4)
    assert int(np.argmax(both)) == 0  # the entry that answers (a man page's own item)
    assert positions <= 3 * cross_encoder.MAX_LENGTH


def test_the_setting_takes_the_cross_encoder():
    assert Settings.from_env({"H2MT_QUOTE_RERANK": "cross"}).quote_rerank == "cross"
    assert "cross" in rerank.RERANKERS


def test_the_cross_encoder_puts_the_entry_before_a_same_word_entry_on_a_big_manual(
        gmsh_tree, cross):  # noqa: F811
    """Gmsh (390 pages, probe question gmsh-13): the linear score puts "-setstring name value:
    Set constant or option string" (the question's words "option", "name") first; the
    cross-encoder's blend (its shipped top and weight) puts first an entry whose quote shows
    "-o file Specify output file name", in one pass over a bounded batch."""
    from bench.quote_time import stood_in_walk
    from engine.routing.dense import load_encoder

    q = "Which command-line option sets the name of the output file?"
    ranked = sentences.score(load_encoder("cpu"), Question.read(q),
                             sentences.candidates(stood_in_walk(gmsh_tree, 50)(q)))
    assert ranked[0].text.startswith("-setstring")
    assert "-o file" not in rerank.passage_text(ranked[0], ranked)
    cross.top, cross.weight = rerank.CROSS_TOP, rerank.CROSS_WEIGHT
    done = rerank.rerank(cross, Question.read(q), ranked, sentences.THRESHOLD)
    assert done.reordered
    assert "-o file Specify output file name" in rerank.passage_text(done.ranked[0], ranked)
    # the measured work: one pass over at most CROSS_TOP rows of MAX_LENGTH positions
    assert 0 < done.tokens <= rerank.CROSS_TOP * cross_encoder.MAX_LENGTH


def test_an_answer_with_the_cross_stage_carries_its_bounded_share(tiny_backbone, tmp_path):
    """Through the ask: the setting builds the cross-encoder once, and the answer's metrics
    hold its time inside the quote's and its batch within CROSS_TOP rows of MAX_LENGTH."""
    from engine.ask import AskOptions, ask
    from tests.support.runtime import widgets_runtime

    rt, doc = widgets_runtime(tiny_backbone, tmp_path)
    rt.settings = rt.settings.with_(quote_rerank="cross")
    on = ask(rt, doc, "Which supply do large widgets need?", AskOptions(mode="quote"),
             log=False)
    m = on.metrics
    assert on.quote is not None and 0.0 < m.rerank_ms <= m.quote_ms
    assert 0 < m.rerank_tokens <= rerank.CROSS_TOP * cross_encoder.MAX_LENGTH
    assert isinstance(rerank.scorer_for(rt), cross_encoder.CrossEncoder)
