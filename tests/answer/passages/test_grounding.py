"""engine.answer.passages.grounding: the routed sections' sentences ranked against the question, the
quote from them, and an answer's evidence lines, on the widgets manual."""
from __future__ import annotations

from engine.answer.passages.grounding import answer_evidence, find_quote, ranked_sentences, sections
from engine.answer.question import Question
from engine import ask as pipeline
from engine.ask import AskOptions, ask
from engine.documents import load_documents, routing_tree
from tests.support.runtime import tiny_rt  # noqa: F401  (the widgets manual on a tiny random Llama)


def test_sentences_quote_and_evidence_come_from_the_routed_sections(tiny_rt):
    rt, doc = tiny_rt
    question = "Which supply do large widgets need?"
    route = ask(rt, doc, question, AskOptions(mode="route", k=2), log=False).route
    docs = load_documents(rt, [doc])
    routing, trees = routing_tree(rt, docs), {doc: docs[doc].tree}
    ranked = ranked_sentences(rt, routing, trees, Question.read(question), route)
    assert ranked and {s.rid for s in ranked} <= set(route.selected)
    assert [s.score for s in ranked] == sorted((s.score for s in ranked), reverse=True)
    def routed_at(bar):  # the request as the passages stage gets it
        return pipeline.route(pipeline.check(rt, doc, question,
                                             AskOptions(mode="route", k=2, quote_threshold=bar)))

    routed = routed_at(0.0)
    assert routed.route.selected == route.selected
    _, quote = find_quote(routed)
    assert quote is not None and quote.rid == ranked[0].rid and ranked[0].text in quote.text
    assert find_quote(routed_at(1e9))[1] is None
    cited = sorted(route.selected)
    found = sections(routing, trees, cited)
    assert [s.node_id for s in found] == [routing.origin[i][1] for i in cited
                                          if trees[doc].node(routing.origin[i][1]).text.strip()]
    lines = answer_evidence(rt, routing, trees, "Large widgets need a 12 V supply.", cited)
    assert lines and "12 V" in lines[0].text
    assert answer_evidence(rt, routing, trees, "  ", cited) == []
    assert ranked_sentences(rt, routing, trees, Question.read(question), None) == []
