"""bench.load reads each answer's stages from the metrics table the Ask tab (and /ask) gives."""
from __future__ import annotations

from app.views.answer_view import metrics_md
from bench.load import STAGES, stage_line, stage_times
from engine.ask import AskOptions, ask
from tests.support.runtime import tiny_rt  # noqa: F401 (the widgets manual on a tiny Llama)


def test_the_stages_of_a_real_answer_come_back_from_its_metrics_table(tiny_rt):
    rt, doc = tiny_rt
    a = ask(rt, doc, "Which supply do large widgets need?",
            AskOptions(mode="text", k=2, max_new_tokens=4), log=False)
    got = stage_times(metrics_md(a))
    assert list(got) == [short for short, _ in STAGES]
    m = a.metrics
    for short, value in (("route", m.route_ms), ("queue", m.queue_ms), ("prefill", m.prefill_ms),
                         ("decode", m.decode_ms), ("check", m.check_ms)):
        assert abs(got[short] - value) <= 0.5, short  # the table rounds to whole ms
    assert got["prefill"] > 0 and got["check"] > 0
    assert stage_line([got]).startswith("cpu wait ")
