"""The check stage of an ask (``review``): from the key line to the verdict. The manual's line
that answers the question (``key_line``), what the answer names that its sources do not
(``check``), the answer's signals (``confidence``) and the verdict on them (``verdict``)."""
from __future__ import annotations

from engine.answer.checks import key_line
from engine.answer.checks.check import check_answer
from engine.answer.checks.confidence import Reading, answer_signals, route_margin
from engine.answer.checks.verdict import Said, judge, unfitted_reader
from engine.answer.passages.grounding import manual_sentences_encoder, sentence_pager
from engine.answer.request import Request, Review


def review(req: Request) -> Review:
    """Check the finished answer (``req.finished``; ``req.generated.result``: its generation,
    None when nothing was generated) against the step's sources (what its model was given to
    read), the quote and the ranked units (``req.passages``, best first)."""
    rt, question, done = req.rt, req.question, req.finished
    result = req.generated.result if req.generated is not None else None
    sources, quote, ranked = req.step.sources, req.quote, req.ranked
    quote_text = quote.text if quote is not None else None
    key = None
    if ranked:  # the manual's line for a question that asks for a name or a value
        given = "\n".join(sources)
        shown = key_line.Shown(ranked, [s for s in ranked if s.text in given], quote)
        key = key_line.choose(question, shown, done.text if result is not None else "",
                              sentence_pager(rt))
    if result is None:
        return Review(key, None, None)
    # stopped by a limit or the repetition stop, not by the model: the text may end mid-name
    stopped = result.stop != "eos" and not done.ended
    check = check_answer(done.text, list(sources), question, quote_text, cut=stopped)
    signals = answer_signals(done.text, Reading(
        question, list(sources), quote_text, quote.score if quote is not None else 0.0,
        result.logprobs, result.stop, route_margin(req.route), rt.encoder,
        manual_sentences_encoder(rt, req.trees),
        req.passages.shown if req.passages is not None else ()), key, check)
    model = rt.learned("answer_check")
    warning = unfitted_reader(model, rt.settings, req.reader)
    if warning is not None:
        model = None
    return Review(key, check, judge(model, signals, Said(question, done.text, check, key,
                                                          quote_text)), warning)
