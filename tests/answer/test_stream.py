"""ask_stream: the route first, then the answer's text as it is generated, then the Answer;
cut answers say so; degenerate memory answers carry a warning instead of evidence."""
from __future__ import annotations

import json

import pytest

from engine.answer.events import AnswerReady, RouteReady, TokenChunk
from engine.answer.generation.cleanup import degeneracy
from engine.ask import AskError, AskOptions, ask, ask_stream
from tests.conftest import ETOOLBOX_TEXT
from tests.support.runtime import tiny_rt  # noqa: F401  (tiny_rt: the widgets manual)


def _events(rt, doc, q, opts):
    return list(ask_stream(rt, doc, q, opts, log=False))


@pytest.mark.parametrize("mode", ["text", "memory", "full", "route"])
def test_events_come_in_order_and_join_to_the_answer(tiny_rt, mode):
    rt, doc = tiny_rt
    events = _events(rt, doc, "How do I power a large widget?",
                     AskOptions(mode=mode, k=2, max_new_tokens=6))
    assert isinstance(events[0], RouteReady) and isinstance(events[-1], AnswerReady)
    assert all(isinstance(e, TokenChunk) for e in events[1:-1])
    answer = events[-1].answer
    assert (events[0].route is None) == (mode == "full")
    assert [c.id for c in events[0].cited] == [c.id for c in answer.cited]
    joined = "".join(e.text for e in events[1:-1])
    if mode == "route":
        assert joined == "" == answer.text and not answer.cut
    elif answer.cut:  # the tiny random model rarely ends on its own
        assert answer.cut_at == answer.metrics.generated_tokens == 6
        assert answer.text == f"{joined} (cut at 6 tokens)"
    else:
        assert answer.text == joined
    out = answer.as_json()
    json.dumps(out)
    assert {"evidence", "cut", "cut_at", "degenerate", "warning", "stop"} <= set(out)
    assert out["degenerate"] == (answer.degenerate is not None)
    # no mode shows a degenerate answer without a warning
    if mode != "route":
        assert (degeneracy(joined) is not None) == out["degenerate"]
    assert (out["warning"] is not None) >= out["degenerate"]
    assert ask(rt, doc, "How do I power a large widget?",
               AskOptions(mode=mode, k=2, max_new_tokens=6), log=False).text == answer.text


def test_user_errors_raise_before_any_event(tiny_rt):
    rt, doc = tiny_rt
    with pytest.raises(AskError, match="empty"):
        ask_stream(rt, doc, "  ")
    with pytest.raises(AskError, match="no document"):
        ask_stream(rt, 999, "hello?")


def test_a_looping_memory_answer_is_labelled_not_shown_as_an_answer(tiny_rt):
    """The tiny random model's memory answer loops: it comes back with degenerate set, a
    warning that offers text mode, and no evidence lines."""
    rt, doc = tiny_rt
    a = ask(rt, doc, "Which supply do large widgets need?",
            AskOptions(mode="memory", k=2, max_new_tokens=40), log=False)
    assert a.degenerate is not None
    out = a.as_json()
    assert out["degenerate"] is True and "text mode" in out["warning"] and out["evidence"] == []


@pytest.mark.real_model
@pytest.mark.xdist_group(ETOOLBOX_TEXT)
def test_text_mode_json_on_a_real_manual(etoolbox_text):
    """`ask --mode text --json` on etoolbox's manual (the question of issue 16): the answer
    names \\patchcmd, and its evidence lines are exactly the cited sentences at or above the
    threshold, each with a page inside its section's pages."""
    from engine.answer.passages.evidence import THRESHOLD, scored_lines
    from engine.answer.passages.grounding import sections
    from engine.documents import load_documents, routing_tree

    rt, doc = etoolbox_text
    a = ask(rt, doc, "How do I patch a command?", AskOptions(mode="text", max_new_tokens=48),
            log=False)
    out = a.as_json()
    assert "\\patchcmd" in out["answer"] and not out["degenerate"]
    assert out["metrics"]["generated_tokens"] >= 1 and out["metrics"]["evidence_ms"] > 0
    assert out["cut"] == out["answer"].endswith("(cut at 48 tokens)")
    docs = load_documents(rt, [doc])
    cited = sections(routing_tree(rt, docs), {doc: docs[doc].tree}, [c.id for c in a.cited])
    scored = scored_lines(rt.encoder, a.text, cited)
    expected = [e.text for e in scored if e.score >= THRESHOLD][:3]
    assert [e["text"] for e in out["evidence"]] == expected
    tree = rt.library.get_tree(doc)
    for e in out["evidence"]:
        node = tree.node(e["node_id"])
        assert e["doc_id"] == doc and e["text"] in " ".join(node.text.split())
        assert node.page_start <= e["page"] <= node.page_end
