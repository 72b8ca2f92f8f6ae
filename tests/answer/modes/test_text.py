"""engine.answer.modes.text: the reader reads the best sentences (or whole sections), the quote
is found first, a loop at the end is trimmed and evidence kept."""
from __future__ import annotations

from engine.answer.modes.text import NO_PASSAGE, TextMode
from engine.ask import AskOptions, ask


def test_text_mode_reads_the_kept_sentences(tiny_rt):
    rt, doc = tiny_rt
    assert TextMode.quote_first and TextMode.trims_loops and TextMode.needs_reader
    assert TextMode().keeps_evidence("repeat") and not TextMode().keeps_evidence("markup")
    a = ask(rt, doc, "Which supply do large widgets need?",
            AskOptions(mode="text", k=2, max_new_tokens=3), log=False)
    assert a.cited and {c.id for c in a.cited} <= set(a.route.selected)
    assert a.quote is not None and a.quote.rid in {c.id for c in a.cited}
    assert a.metrics.quote_ms > 0 and a.metrics.ttft_ms > a.metrics.quote_ms


def test_no_sentence_over_the_threshold_answers_without_the_manual(tiny_rt):
    rt, doc = tiny_rt
    a = ask(rt, doc, "Which supply do large widgets need?",
            AskOptions(mode="text", max_new_tokens=2, quote_threshold=1e9), log=False)
    assert a.cited == [] and a.warning.startswith(NO_PASSAGE) and a.not_covered


def test_sections_packing_reads_whole_sections(tiny_rt):
    rt, doc = tiny_rt
    opts = dict(mode="text", k=2, max_new_tokens=2)
    sections = ask(rt, doc, "Which supply do large widgets need?",
                   AskOptions(text_packing="sections", **opts), log=False)
    assert sections.cited and (sections.warning is None or NO_PASSAGE not in sections.warning)
    assert {c.id for c in sections.cited} <= set(sections.route.selected)


def test_the_answer_is_checked_against_the_context_the_reader_read(tiny_rt, monkeypatch):
    import engine.answer.checks.review
    from engine.answer.checks.check import check_answer

    seen = {}

    def spy(answer, sources, question, quote=None, cut=False):
        seen.update(sources=sources, question=question, quote=quote)
        return check_answer(answer, sources, question, quote, cut)

    monkeypatch.setattr(engine.answer.checks.review, "check_answer", spy)
    rt, doc = tiny_rt
    a = ask(rt, doc, "Which supply do large widgets need?",
            AskOptions(mode="text", k=2, max_new_tokens=3), log=False)
    (context,) = seen["sources"]
    assert a.quote.text.split(". ")[0] in " ".join(context.split())  # the best sentence is read
    assert context.startswith("[1] ") and seen["quote"] == a.quote.text
    assert seen["question"].text == "Which supply do large widgets need?" and a.check is not None
