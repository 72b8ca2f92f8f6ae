"""engine.answer.modes.quote: the quote is the answer, found before anything is shown."""
from __future__ import annotations

from engine.answer.modes.quote import NOT_COVERED, QuoteMode
from engine.ask import AskOptions, ask


def test_the_quote_is_the_answer_and_counts_in_ttft(tiny_rt):
    rt, doc = tiny_rt
    assert QuoteMode.quote_first
    a = ask(rt, doc, "Which supply do large widgets need?", AskOptions(mode="quote", k=2),
            log=False)
    assert a.quote is not None and a.text == a.quote.text
    assert [c.id for c in a.cited] == [a.quote.rid]
    assert a.metrics.ttft_ms == a.metrics.route_ms + a.metrics.quote_ms
    assert a.metrics.generated_tokens == 0 and a.stop is None


def test_no_passage_over_the_threshold_says_so(tiny_rt):
    rt, doc = tiny_rt
    a = ask(rt, doc, "Which supply do large widgets need?",
            AskOptions(mode="quote", quote_threshold=1e9), log=False)
    assert a.quote is None and a.not_covered and a.text == NOT_COVERED and a.cited == []
