"""The Ask tab labels an option with the modes that read it (``option_table.reads``), and an
answer's metrics name its stages in plain words."""
from __future__ import annotations

from app.shared.option_controls import read_by
from app.views.answer_view import metric_rows


def test_an_option_is_labelled_with_the_modes_that_read_it():
    assert read_by("gate") == " (memory and flat modes)"
    assert read_by("hier_pos") == " (memory mode)"
    assert read_by("text_prompt") == " (text and full modes)"
    assert read_by("k") == ""  # every mode routes


def test_the_stages_of_an_answer_in_plain_words():
    rows = dict(metric_rows({"ttft_ms": 900.0, "queue_ms": 12.0, "prefill_ms": 300.4,
                             "decode_ms": 2000.0, "check_ms": 80.0, "cpu_wait_ms": 0.0}))
    assert rows["waiting for the reader"] == "12 ms"
    assert rows["reading the prompt (prefill)"] == "300 ms"
    assert rows["writing the answer"] == "2000 ms" and rows["checking the answer"] == "80 ms"
    assert "waiting for a free core" not in rows  # no wait: not shown
    quote_only = dict(metric_rows({"ttft_ms": 50.0, "queue_ms": None, "prefill_ms": None}))
    assert "waiting for the reader" not in quote_only
