"""engine/answer/evaluation.py: the question file, where the route lost the gold section, the
risk-coverage curve (the probe's verdicts themselves: tests/bench/test_probe.py)."""
from __future__ import annotations

import json

import pytest

from engine.answer.evaluation import (ProbeQuestion, gold_nodes, parse_questions,
                                      risk_coverage, where_lost)
from engine.routing.trace import RouteNode


def _q(pages=(), section=None) -> ProbeQuestion:
    return ProbeQuestion("q1", "m", "How?", "x", tuple(pages), "", section)


def test_the_question_file_takes_the_probe_format_and_names_a_bad_line():
    text = "\n".join(json.dumps(r) for r in [
        {"id": "a", "manual": "etoolbox", "question": "How do I patch?", "key": "patchcmd",
         "pages": [13], "kind": "how"},
        {"question": "Where?", "key": "x|y", "page": 4, "section": "Hooks"},
        {"question": "No page?", "key": "z"}]) + "\n\n"
    qs = parse_questions(text, "mine.jsonl")
    assert [q.pages for q in qs] == [(13,), (4,), ()]
    assert qs[1].section == "Hooks" and qs[1].id == "mine.jsonl:2" and qs[0].kind == "how"
    for bad, why in [('{"question": "Q", "key": ""}', "mine.jsonl:1: the key is empty"),
                     ('{"question": "Q", "key": "(("}', "mine.jsonl:1: the key does not compile"),
                     ('{"key": "x"}', "mine.jsonl:1: no question"),
                     ('{"question": "Q", "key": "x", "pages": ["4"]}', "whole page numbers"),
                     ("not json", "mine.jsonl:1: not a JSON object"), ("", "no questions")]:
        with pytest.raises(ValueError, match=why):
            parse_questions(bad, "mine.jsonl")


def _nodes():
    #        0 root
    #    1 Ch1 (1-5)      2 Ch2 (6-10)
    #  3 A (1-2) 4 B (3-5)   5 C (6-8)  6 D (9-10)
    spec = [(0, None, "root", 0, 1, 10, "root"), (1, 0, "Ch1", 1, 1, 5, "selected"),
            (2, 0, "Ch2", 1, 6, 10, "selected"), (3, 1, "A", 2, 1, 2, "selected"),
            (4, 1, "B", 2, 3, 5, "pruned"), (5, 2, "C", 2, 6, 8, "selected"),
            (6, 2, "D", 2, 9, 10, "unvisited")]
    return [RouteNode(id=i, parent=p, doc_id=1, node_id=i, title=t, depth=d, page_start=a,
                      page_end=b, status=s) for i, p, t, d, a, b, s in spec]


def test_where_the_route_lost_the_gold_section():
    nodes = _nodes()
    assert [n.id for n in gold_nodes(nodes, _q([4]))] == [4]  # the most specific span
    assert where_lost(nodes, _q([4])) == "depth 2: “B” pruned (scored, not followed)"
    assert where_lost(nodes, _q([9])) == "depth 2: “D” never scored"
    assert where_lost(nodes, _q([7])) is None  # C was selected
    assert where_lost(nodes, _q(section="b")) == "depth 2: “B” pruned (scored, not followed)"
    assert where_lost(nodes, _q()) is None  # no gold given
    assert where_lost(nodes, _q([40])) == "the gold section is not in the tree"


def _row(score, right, marked=False):
    return {"quote_score": score, "verdict": {"answer_holds": right, "marked": marked}}


def test_risk_coverage_answers_the_most_confident_first():
    rows = [_row(0.2, False), _row(0.9, True), _row(0.5, True), _row(0.8, False, marked=True)]
    # order: 0.9 right, 0.5 right, 0.2 wrong, then the marked one (wrong)
    assert risk_coverage(rows) == [(0.25, 0.0), (0.5, 0.0), (0.75, 1 / 3), (1.0, 0.5)]
