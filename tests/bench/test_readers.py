"""bench.readers: pairing the two readers' rows of one run, identical answers, the TTFT ratio."""
from __future__ import annotations

from bench.readers import comparison_table, differences, pairs


def _row(qid, label, answer, ttft, set_name="ordqa"):
    return {"set": set_name, "id": qid, "mode": f"text [{label}]", "answer": answer,
            "ttft_ms": ttft, "stop": "eos"}


def test_pairs_identical_answers_and_ratio():
    rows = [_row("q1", "in-process", "Use -v.", 100), _row("q1", "served", "Use -v.", 130),
            _row("q2", "in-process", "Run make.", 200), _row("q2", "served", "Run make all.", 260),
            _row("q3", "in-process", "alone", 50),  # the served one is missing: not paired
            {"set": "ordqa", "id": "q1", "mode": "route [served]", "answer": None, "ttft_ms": None}]
    assert list(pairs(rows)) == [("ordqa", "text")]
    table = comparison_table(rows)
    assert "| ordqa | text | 2 | 1 | 150 | 195 | 1.30 |" in table
    (d,) = differences(rows)
    assert (d["id"], d["at"], d["served"]) == ("q2", 8, "Run make all.")
