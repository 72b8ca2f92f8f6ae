"""An answer's metrics name its stages: the wait for a place in the generation worker, the
prefill, the decoding and the check, each within the answer's own clock."""
from __future__ import annotations

import pytest

from engine.ask import AskOptions, ask
from tests.support.runtime import tiny_rt  # noqa: F401 (the widgets manual on a tiny Llama)


@pytest.mark.parametrize("mode", ["text", "memory"])
def test_a_generated_answer_times_its_stages(tiny_rt, mode):
    rt, doc = tiny_rt
    m = ask(rt, doc, "Which supply do large widgets need?",
            AskOptions(mode=mode, k=2, max_new_tokens=6), log=False).metrics
    assert m.queue_ms is not None and m.prefill_ms is not None and m.decode_ms is not None
    assert m.queue_ms >= 0 and m.prefill_ms > 0 and m.decode_ms >= 0 and m.check_ms > 0
    # the first token comes after routing, the wait and the prefill; the rest after it
    assert m.route_ms + m.queue_ms + m.prefill_ms <= m.ttft_ms + 1
    assert m.ttft_ms + m.decode_ms <= m.total_ms + 1


def test_an_answer_without_generation_has_no_generation_stages(tiny_rt):
    rt, doc = tiny_rt
    m = ask(rt, doc, "Which supply do large widgets need?", AskOptions(mode="quote"),
            log=False).metrics
    assert (m.queue_ms, m.prefill_ms, m.decode_ms) == (None, None, None)
