"""The quote block of the Ask tab: the manual's own words first, told apart from the model's.

Renders ``engine.answer.passages.quote.Quote`` (or its absence: the manual does not seem to cover the
question) as Markdown, in plain words: the quote is the manual's text, verbatim, with its
section and page; the answer under it is written by the model.
"""
from __future__ import annotations

from engine.document.tree import page_name

NOT_COVERED = ("**The manual does not seem to cover this question**: no passage of the routed "
               "sections matches it closely enough. Any answer below is the model's own, "
               "without the manual.")
MODEL_NOTE = "Check the model's answer below against it."


def _md(text: str) -> str:
    """Markdown-safe inline text (the manual's words shown as they are)."""
    for ch in "\\`*_[]<>#|":
        text = text.replace(ch, "\\" + ch)
    return text


def quote_markdown(quote, not_covered: bool, model_answers: bool) -> str:
    """The quote block: the quote with its heading path and page, or the not-covered line;
    ``model_answers``: a model's answer follows (the mode ``generates``), said under the quote."""
    if quote is None:
        return NOT_COVERED if not_covered else ""
    where = _md(quote.heading or "the manual")
    page = f", {page_name(quote.page, quote.page_label)}" if quote.page else ""
    if getattr(quote, "ocr", False):
        page += ", read by OCR from a scanned page"
    note = f" {MODEL_NOTE}" if model_answers else ""
    # a command or code line the passage introduces stays on a line of its own (a hard break
    # at each line's end; Markdown would otherwise run the quote's lines into one paragraph)
    lines = [f"> {_md(line)}" for line in quote.text.splitlines() if line.strip()]
    # one paragraph above the quote (where it is from, why it was chosen, what follows), so that
    # the quote, the answer and the top of the routing tree fit one first screen
    return "\n".join([f"**From the manual** ({where}{page}), verbatim. "
                      f"<small>{rank_reason(quote)}{note}</small>", "", "  \n".join(lines)])


def rank_reason(quote) -> str:
    """One line: why this passage was quoted (the ranker's score, the channel that found it)."""
    found = {"both": "routing and flat BM25", "routed section": "routing",
             "flat BM25": "flat BM25 alone (its section was not routed)"}.get(quote.channel,
                                                                          quote.channel)
    return f"Ranked first ({quote.score:.2f}) via {found}."
