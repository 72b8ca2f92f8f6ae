"""The quote: the manual's best passage for a question, verbatim, shown before any answer.

The passage is chosen by a rerank of the routed nodes' units (``sentences.score``; units are
sentences, lines, and sentences with the lines they introduce: ``engine.answer.passages.units``), not
by routing order: the best unit and the ones after it in the same section while the quote stays
within ``MAX_SENTENCES`` units and ``MAX_WORDS`` words, so a definition keeps the sentence that
completes it. A best unit that leans on the one before ("It is as simple as ...") starts the
quote one unit earlier. A best unit inside an entry (``units.Unit.head``: a definition item,
a list item, a step list, a FAQ answer) starts the quote at the entry's first unit, its
signature, so the line that names the answer is never left above the quote; when the entry up
to the best unit runs over the caps, the signature comes first and the quote goes on from the
best unit after a line break (that opening line does not count among the ``MAX_SENTENCES``
units; its words count). Lines keep their line breaks. Chosen where the issue is silent: the continuation runs forward only
(a manual states the subject first, then its details), and the 80-word cap follows the issue's
measurement (the opening 80 words of the gold chunk scored best against the reference answers).

Measured and left out: quoting a section's opening lines for a how-to question ("how do I ...")
instead of its best sentence. On both dev sets it scored lower against the reference answers
(docs/results.md, "The quote's weights, measured"): a how-to section's opening is usually an
overview, the steps come later.

A quote is never a fragment: a passage of fewer than ``MIN_WORDS`` words that is not a command
line (``passages.is_command_line``; the title page's lone "The" was one) is passed over for the
next best unit. Below the bar (``grounding.quote_bar``: the passage ranker's, or
``sentences.THRESHOLD``) there is no quote: the answer carries ``not_covered`` instead.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.answer.passages.sentences import THRESHOLD, Sentence, join_units
from engine.answer.passages.units import is_command_line

# units (a line counts as one); 3 before lines were units (docs/results.md, "Quotes that hold
# the fact": 5 recalls more of the reference's key terms on both dev sets)
MAX_SENTENCES = 5
MAX_WORDS = 80
MIN_WORDS = 4  # a shorter quote that is not a command line is a fragment
# room a quote started at its entry's opening keeps for the units after the best one
AFTER_BEST = 2
AFTER_BEST_WORDS = 20
TRIES = 10  # best units tried before giving up on a quote that is not a fragment


@dataclass
class Quote:
    text: str  # the manual's units verbatim (sentences space-joined, lines on lines of their own)
    doc_id: int | None
    node_id: int
    heading: str  # heading path of its section
    page: int | None  # physical 1-based page where the quote begins; None when unknown
    score: float  # the best unit's score (the passage ranker's probability, or sentences.score)
    rid: int  # routed node id
    channel: str = "routed section"  # which candidate channel found it (ranking.Candidate)
    page_label: str | None = None  # the page's printed label where the PDF gives one
    ocr: bool = False  # the section's text was read by OCR (a scanned page)

    def as_json(self) -> dict:
        return {"text": self.text, "doc": self.doc_id, "node": self.node_id,
                "heading": self.heading, "page": self.page, "page_label": self.page_label,
                "ocr": self.ocr, "score": self.score, "channel": self.channel}


def is_fragment(text: str) -> bool:
    """Fewer than ``MIN_WORDS`` words and not a command line (module docstring)."""
    return len(text.split()) < MIN_WORDS and not is_command_line(text.strip())


def choose(ranked: list[Sentence], threshold: float = THRESHOLD, page_of=None) -> Quote | None:
    """The quote from sentences ranked best first (module docstring); None below the threshold
    (or when the ``TRIES`` best all make fragments). ``page_of(sentence)`` locates a sentence's
    page (None: its section's first page)."""
    for best in ranked[:TRIES]:
        if best.score < threshold:
            return None
        quote = _quote_from(best, ranked, page_of)
        if not is_fragment(quote.text):
            return quote
    return None


def _quote_from(best: Sentence, ranked: list[Sentence], page_of) -> Quote:
    """The quote that starts at ``best``'s entry (or one unit before ``best``) and runs on in
    its section (module docstring)."""
    section = sorted((s for s in ranked if (s.doc_id, s.node_id) == (best.doc_id, best.node_id)),
                     key=lambda s: s.index)
    start = next(i for i, s in enumerate(section) if s is best)
    if best.leans and start > 0 and section[start - 1].index == best.index - 1:
        start -= 1  # the unit it refers to comes first ("It is as simple as" needs its subject)
    lead: list[Sentence] = []
    if best.kind == "row":  # one table row, with its header (the unit holds both)
        section, start = [best], 0
    elif 0 <= best.head < section[start].index:
        lead, start = _entry_start(section, start, best)
    picked, words = list(lead), sum(len(s.text.split()) for s in lead)
    for s in section[start:]:
        n = len(s.text.split())
        if len(picked) > len(lead) and (len(picked) - len(lead) >= MAX_SENTENCES
                                        or words + n > MAX_WORDS) and s is not best:
            break
        if len(picked) > len(lead) and s.index != picked[-1].index + 1:
            break  # contiguous only (a dropped piece, e.g. a contents line, ends the passage)
        picked.append(s)
        words += n
    first = picked[0]
    text = join_units(picked[len(lead):])
    if lead:  # the entry's opening, then (after a line break) the part that answers
        text = f"{join_units(lead)}\n{text}"
    elif best.lead and picked[0].lead:  # an entry cut at the node budget: its signature first
        text = f"{best.lead}\n{text}"
    page = first.page_start
    if page_of is not None:
        # where the quote begins: its first unit's page or, when that unit is too short to be
        # found on a page ("system)", a label line), the page of the first unit that is found
        page = next((p for p in map(page_of, picked) if p is not None), None)
    return Quote(text=text, doc_id=first.doc_id, node_id=first.node_id,
                 heading=first.heading, page=page, score=best.score, rid=first.rid,
                 channel=best.channel)


def _entry_start(section: list[Sentence], start: int,
                 best: Sentence) -> tuple[list[Sentence], int]:
    """Where a quote of ``best`` inside an entry starts: (lead, start) with ``lead`` empty and
    ``start`` at the entry's first unit when the entry's units up to ``best`` are all there and
    fit the caps (``MAX_SENTENCES``, ``MAX_WORDS``) with room left for what follows ``best``
    (``AFTER_BEST`` units, ``AFTER_BEST_WORDS`` words: the unit after the best one often holds
    the answer it introduces); else ``lead`` is the entry's first unit alone (its signature, a
    list's first step) and the quote goes on from ``start``."""
    at = {s.index: i for i, s in enumerate(section)}
    if best.head not in at:
        return [], start
    first = at[best.head]
    span = section[first:start + 1]
    whole = all(b.index == a.index + 1 for a, b in zip(span, span[1:]))
    if whole and len(span) <= MAX_SENTENCES - AFTER_BEST and \
            sum(len(s.text.split()) for s in span) <= MAX_WORDS - AFTER_BEST_WORDS:
        return [], first
    return [section[first]], start


PASSAGES = 3  # passages shown: the quote, then the best of other entries


def passages(quote: Quote | None, ranked: list[Sentence], threshold: float = THRESHOLD,
             page_of=None, n: int = PASSAGES) -> list[Quote]:
    """The quote, then up to ``n - 1`` more passages, each built as a quote is from the next
    best unit that lies in no passage chosen before (another entry of the manual, in the same
    section or another); none below the threshold, none a fragment. Empty without a quote."""
    if quote is None:
        return []
    chosen = [quote]
    for best in ranked[:TRIES * n]:
        if len(chosen) >= n or best.score < threshold:
            break
        if any(best.text in p.text for p in chosen):
            continue
        p = _quote_from(best, ranked, page_of)
        if is_fragment(p.text) or any(_overlap(p.text, c.text) for c in chosen):
            continue
        chosen.append(p)
    return chosen


def _overlap(a: str, b: str) -> bool:
    """Two passages share a unit: one holds the other's opening (passages are runs of units)."""
    return a[:60] in b or b[:60] in a
