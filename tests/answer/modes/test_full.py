"""engine.answer.modes.full: the manual from the start; no route shown, the clock starts after
routing, the quote found after generation."""
from __future__ import annotations

from engine.answer.modes.full import FullMode
from engine.ask import AskOptions, ask
from tests.support.runtime import MANUAL


def test_full_mode_reads_the_manual_without_a_route(tiny_rt):
    rt, doc = tiny_rt
    assert not FullMode.shows_route and FullMode.needs_reader and not FullMode.quote_first
    a = ask(rt, doc, "Which supply do large widgets need?",
            AskOptions(mode="full", max_new_tokens=2), log=False)
    assert a.route is None and a.cited == [] and a.metrics.route_ms == 0.0
    whole = len(rt.backbone.encode(MANUAL))
    assert a.metrics.prefill_tokens > whole // 2  # the manual itself is in the prompt
    assert a.quote is not None  # routed for its quote only
