"""engine.answer.modes.route: routing only; the quote comes after, outside TTFT."""
from __future__ import annotations

from engine.answer.modes.route import RouteMode
from engine.ask import AskOptions, ask


def test_route_mode_cites_the_selection_and_generates_nothing(tiny_rt):
    rt, doc = tiny_rt
    assert not RouteMode.quote_first and RouteMode.shows_route
    a = ask(rt, doc, "Which supply do large widgets need?", AskOptions(mode="route", k=2), log=False)
    assert [c.id for c in a.cited] == sorted(a.route.selected)
    assert a.text == "" and a.stop is None and a.evidence == [] and a.metrics.generated_tokens == 0
    assert a.metrics.ttft_ms == a.metrics.route_ms  # the quote (after) is not in TTFT
    assert a.quote is not None and a.metrics.quote_ms > 0
