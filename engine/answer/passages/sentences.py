"""Sentence-level evidence: the routed sections' sentences scored against the question.

RECOMP-style extractive compression (arXiv:2310.04408: keep only the sentences that help, or
nothing when none does), with the routing channels' ideas applied per sentence:

- words matched: BM25 (the lexical channel's tokenizer and index, ``engine.routing.lexical``)
  over the sentences of the routed sections, each sentence's tokens joined with its section's
  heading path, divided by the best sentence's BM25 (0..1 within the question);
- meaning: cosine of the question to the sentence under its heading path ("path: sentence"),
  all-MiniLM-L6-v2 (the dense channel's encoder).

Both read a unit's **window** (``windows``): the unit and up to two units after it in its
section within ``WINDOW_WORDS`` words, what a quote starting at the unit would show.

``score = cosine + LEXICAL_WEIGHT * bm25 / max bm25 + HEADING_WEIGHT * heading match +
TYPE_WEIGHT * answer-type fit - code weight * code line for a how-to question``: the heading
match is the share of the question's words in the unit's heading path; the fit is 1 when the
unit is the kind of passage the question asks for (``engine.answer.passages.answer_type``: a
how-to question and a command line, ...); with the code prior (``ScoreRule.code_weight``,
``CODE_WEIGHT`` when ``Settings.quote_code_prior`` is on, else 0) a command or code line
(``unit_prior.shape_of``) loses it for a how-to question (``unit_prior.CodePrior``). The cosine
carries the absolute confidence (the BM25 part is relative to the question's candidates), so
``THRESHOLD`` is a bar on it plus the word match. Chosen (the issue is silent on the form): a
linear sum, as the fused router sums its channels; the weight and the threshold are set on the
dev sets (docs/results.md, "Quotes and sentence-level evidence").

The candidates are the sections' units (``engine.answer.passages.units``): sentences, lines (however
short), and a sentence with the command or code line(s) it introduces, whose text keeps its line
breaks. ``select`` keeps the best units above the threshold within a token budget and returns
them in document order (the reader's context, lines kept: ``join_units``);
``engine.answer.passages.quote`` picks the quote.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from engine.answer.passages.answer_type import fits
from engine.answer.question import Question
from engine.answer.passages.sections import block
from engine.answer.passages.unit_prior import CodePrior, shape_of
from engine.answer.passages.units import split_units
from engine.routing import lexical
from engine.routing.identifiers import as_words

LEXICAL_WEIGHT = 0.5  # docs/results.md, "The quote's weights, measured"
THRESHOLD = 0.70  # docs/results.md, "The quote's weights, measured"
# heading-path match and answer-type cue (docs/results.md, "Quotes that hold the fact")
HEADING_WEIGHT = 0.2
TYPE_WEIGHT = 0.1
# a code line's prior for a how-to question, when the code prior is on (docs/results.md, "The
# unit within the section (issue 66, fourth session)": chosen leave one manual out)
CODE_WEIGHT = 0.05
BUDGET = 150  # reader context tokens (150, 300, 500 measured on both dev sets: docs/results.md)
# Only the best ENCODED sentences by BM25 go through the encoder (the rest keep cosine 0, so they
# rank below and never pass the threshold, yet stay in the list for the quote's continuation).
# On both dev sets the quote was the same with 16, 32, 48 or every sentence encoded
# (docs/results.md, "The quote's weights, measured"); 32 leaves the reader's 150-token selection
# room.
ENCODED = 32
# A unit is scored with the units after it in its section (``windows``), what a quote starting
# there shows: a short unit alone is mostly its heading to the encoder, so a signature line
# ("\newtoggle{<name>}") or a label outscored the sentences that hold the fact, and a
# description lost its term. Chosen: at most 3 units and 48 words (the quote shows up to 5 and
# 80; shorter keeps the encoder's cost near the unit's), set before measuring; measured against
# the unit alone and an even mix of both (docs/results.md, "each unit scored with the passage a
# quote from it would show").
WINDOW_WORDS = 48
WINDOW_UNITS = 3


@dataclass
class Sentence:
    """One sentence of a routed section, where it is, and how well it answers the question."""

    rid: int  # routed node id
    doc_id: int | None
    node_id: int
    heading: str  # heading path (" > "-joined)
    index: int  # position among its section's units (0 = the section's opening)
    text: str  # a sentence, a line, or a sentence and the lines it introduces ("\n" between)
    page_start: int | None  # the section's pages (the sentence's own page is located later)
    page_end: int | None
    order: int = 0  # document order across sections (routed id, then index)
    score: float = 0.0
    cosine: float = 0.0
    lexical: float = 0.0
    kind: str = "sentence"  # engine.answer.passages.units.Unit.kind: sentence | line | intro
    leans: bool = False  # refers to the unit before it (the quote brings that one along)
    head: int = -1  # index of its entry's first unit (units.Unit.head; -1: its own)
    entry: str = ""  # its entry's name (units.Unit.entry): read as part of its heading
    lead: str = ""  # the signature its entry opened with in an earlier chunk (sections.entry_lead)
    # which candidate channel found it (engine.answer.passages.ranking.Candidate.channel)
    channel: str = "routed section"
    # the second stage's score where it re-read this unit (engine.answer.passages.rerank)
    rerank: float | None = None

    @property
    def path(self) -> str:
        """Its heading path as scoring reads it: the section's, then its entry's name (an
        entry's name counts as its heading), identifiers also read as words
        (``engine.routing.identifiers.as_words``)."""
        title = self.heading.rsplit(" > ", 1)[-1]
        named = self.entry and not (title and self.entry.startswith(title))
        return as_words(f"{self.heading} > {self.entry}" if named else self.heading)


@dataclass
class SectionText:
    """A routed section as sentence scoring reads it."""

    rid: int
    doc_id: int | None
    node_id: int
    heading: str
    body: str
    page_start: int | None
    page_end: int | None
    lead: str = ""  # the signature of the entry its text goes on from (sections.entry_lead)


def candidates(sections: list[SectionText]) -> list[Sentence]:
    """Every unit of the sections (``passages.split_units``: sentences, lines, a sentence with
    the lines it introduces), in document order. A text two sections share is a unit of each
    (two entries of a reference with one description: each section's quote and window read
    on through it); ``select`` gives the reader each text once."""
    out = []
    for s in sorted(sections, key=lambda s: (s.doc_id or 0, s.rid)):
        title = s.heading.split(" > ")[-1] if s.heading else ""
        for i, u in enumerate(split_units(s.body, title)):
            lead = s.lead if s.lead and not u.entry and u.para == 0 else ""
            out.append(Sentence(rid=s.rid, doc_id=s.doc_id, node_id=s.node_id, heading=s.heading,
                                index=i, text=u.text, page_start=s.page_start, page_end=s.page_end,
                                order=len(out), kind=u.kind, leans=u.leans, head=u.head,
                                entry=u.entry or lead.split("\n")[0], lead=lead))
    return out


def heading_match(question_tokens: set[str], heading: str) -> float:
    """Share of the question's words (the lexical channel's tokens) in a heading path."""
    return len(question_tokens & set(lexical.tokenize(heading))) / max(1, len(question_tokens))


def windows(sents: list[Sentence], words: int = WINDOW_WORDS,
            units: int = WINDOW_UNITS) -> list[str]:
    """Each unit's passage as the quote would show it from there: the unit and the units right
    after it in its section (contiguous), while the passage stays within ``units`` units and
    ``words`` words (the unit itself always; ``words`` 0: the unit alone). A table row is alone,
    as it is quoted (with its header: ``quote``)."""
    by_place = {(s.doc_id, s.node_id, s.index): s for s in sents}
    out = []
    for s in sents:
        text, n, count = s.text, len(s.text.split()), 1
        nxt = by_place.get((s.doc_id, s.node_id, s.index + 1))
        while words and s.kind != "row" and nxt is not None and count < units:
            m = len(nxt.text.split())
            if n + m > words:
                break
            text, n, count = f"{text}\n{nxt.text}", n + m, count + 1
            nxt = by_place.get((s.doc_id, s.node_id, nxt.index + 1))
        out.append(text)
    return out


@dataclass(frozen=True)
class ScoreRule:
    """The linear score's weights (module docstring; ``code_weight``: a code line's prior for a
    how-to question, 0 without it) and its reach: how many units are encoded (the ``encoded``
    best by BM25) and the words of a unit's window (0: the unit alone)."""

    lexical_weight: float = LEXICAL_WEIGHT
    heading_weight: float = HEADING_WEIGHT
    type_weight: float = TYPE_WEIGHT
    encoded: int = ENCODED
    window_words: int = WINDOW_WORDS
    code_weight: float = 0.0


@dataclass(frozen=True)
class Expanded:
    """Each sentence's expansion (``engine.answer.passages.expansion``): ``terms``, the
    back-of-book index's terms for its page, read with its heading path by the word match and,
    with ``dense``, by the encoder; ``bonus``, its share from its expansion
    (``expansion.bonus``), added to its score."""

    terms: list[str] | None = None
    dense: bool = False
    bonus: list[float] | None = None


def score(encoder, question: Question, sents: list[Sentence],
          rule: ScoreRule = ScoreRule(), expanded: Expanded = Expanded()) -> list[Sentence]:
    """Sets each sentence's ``cosine``, ``lexical`` and ``score`` (module docstring); returns
    them best first. Words and meaning are read over each unit's window (``windows``: what a
    quote starting there shows; ``rule.window_words`` 0: the unit alone); the answer-type fit
    over the unit. Only the ``rule.encoded`` best by BM25 are encoded (``ENCODED``); the
    others, and every sentence without an encoder, have cosine 0 (word match alone). The
    question's vector is its ``dense`` when routing encoded it already. ``expanded``: each
    sentence's expansion (``Expanded``)."""
    if not sents:
        return []
    q, encoded, window_words = question, rule.encoded, rule.window_words
    lexical_weight, heading_weight = rule.lexical_weight, rule.heading_weight
    type_weight, query_vec = rule.type_weight, question.dense
    texts = windows(sents, window_words)
    terms, dense_terms, bonus = expanded.terms, expanded.dense, expanded.bonus
    extra = terms or [""] * len(sents)
    index = lexical.LexicalIndex([lexical.evidence_tokens([f"{s.path} {x}" if x else s.path], t,
                                                          title_boost=1)
                                  for s, t, x in zip(sents, texts, extra)])
    bm = index.scores(list(q.tokens))
    best_bm = float(bm.max()) if len(bm) else 0.0
    lex = bm / best_bm if best_bm > 0 else np.zeros(len(sents), dtype=np.float32)
    cos = np.zeros(len(sents), dtype=np.float32)
    if encoder is not None:
        # no word of the question matched: meaning is the only evidence, so every sentence counts
        chosen = np.argsort(-lex, kind="stable")[:encoded if best_bm > 0 else len(sents)]
        heads = [f"{s.path} ({x})" if dense_terms and x else s.path
                 for s, x in zip(sents, extra)]
        vec = encoder.encode([f"{heads[i]}: {texts[i]}" if heads[i] else texts[i]
                              for i in chosen])
        qv = query_vec if query_vec is not None else encoder.encode_query(q.text)
        cos[chosen] = vec @ qv
    qtype, qtok = q.kind, set(q.tokens)
    heads = {h: heading_match(qtok, h) for h in {s.path for s in sents}}
    prior = CodePrior(rule.code_weight)
    for s, c, x, b in zip(sents, cos, lex, bonus or [0.0] * len(sents)):
        s.cosine, s.lexical = round(float(c), 4), round(float(x), 4)
        s.score = round(float(c) + lexical_weight * float(x) + heading_weight * heads[s.path]
                        + type_weight * fits(qtype, s.kind, s.text)
                        + prior.bonus(qtype, shape_of(s)) + b, 4)
    return sorted(sents, key=lambda s: (-s.score, s.order))


def select(ranked: list[Sentence], count_tokens, budget: int = BUDGET,
           threshold: float = THRESHOLD) -> list[Sentence]:
    """The best units at or above ``threshold`` whose tokens fit ``budget`` (a unit that would
    pass it is skipped, a shorter one may still fit), returned in document order, each text
    once. A kept unit that leans on the one before brings it along when both fit (the quote's
    rule), and so does a unit inside an entry its entry's opening (the signature with the
    description's first sentence: the unit a question about the entry asks for). The entry names ``context_text`` adds are not charged: a signature line is short,
    and charging it pushed a whole entry out for a weaker sentence (etoolbox's \\docsvlist)."""
    by_place = {(s.doc_id, s.node_id, s.index): s for s in ranked}
    openings: dict[tuple, Sentence] = {}  # (document, entry name) -> the entry's opening unit
    for s in sorted(ranked, key=lambda s: s.order):
        if s.kind == "entry" and s.entry and s.text.startswith(s.entry):
            openings.setdefault((s.doc_id, s.entry), s)
    kept, texts, used = {}, set(), 0
    for s in ranked:
        if s.score < threshold:
            break
        if id(s) in kept or s.text in texts:
            continue  # kept already, or its text is (another section's copy)
        group = [s]
        before = by_place.get((s.doc_id, s.node_id, s.index - 1)) if s.leans else None
        if before is not None and id(before) not in kept and before.text not in texts:
            group.insert(0, before)
        opening = openings.get((s.doc_id, s.entry))
        if opening is not None and id(opening) not in kept and opening.text not in texts \
                and opening not in group:
            group.insert(0, opening)
        n = sum(count_tokens(x.text) + 4 for x in group)
        if used + n > budget:
            group, n = [s], count_tokens(s.text) + 4
            if used + n > budget:
                continue
        used += n
        kept.update((id(x), x) for x in group)
        texts.update(x.text for x in group)
    return sorted(kept.values(), key=lambda s: s.order)


def _entry_name(s: Sentence) -> str:
    """The name of the entry ``s`` belongs to when its own text does not open with it (a
    description's later sentence, or a chunk going on from an entry opened in an earlier one)."""
    return s.entry if s.entry and not s.text.startswith(s.entry) else ""


def with_entry_names(body: list[Sentence]) -> list[Sentence]:
    """A section's kept units, the first one of each entry that does not open with the entry's
    name (its signature line) preceded by that name on a line of its own: the reader sees the
    manual's own term (``\\patchcmd[...]``) beside a description sentence that only says "this
    command". Each section's block names its entry (a block reads on its own under its
    heading), so an entry cut over two sections is named in both."""
    out, shown = [], set()
    for u in body:
        name = _entry_name(u)
        if name and name not in shown and not any(x.text.startswith(name) for x in out):
            u = replace(u, text=f"{name}\n{u.text}", kind="entry")
        if u.entry:
            shown.add(u.entry)
        out.append(u)
    return out


def context_text(kept: list[Sentence], page_of=None) -> str:
    """The reader's context: the kept sentences grouped under their heading path and page,
    numbered by section, in document order (``sections.block``), each entry's name before its
    first kept unit (``with_entry_names``). ``page_of(sentence)`` gives a sentence's page."""
    groups: list[tuple[tuple, list[Sentence], int | None]] = []
    for s in kept:
        key = (s.doc_id, s.node_id)
        if not groups or groups[-1][0] != key:
            groups.append((key, [], page_of(s) if page_of is not None else s.page_start))
        groups[-1][1].append(s)
    return "\n\n".join(block(i + 1, body[0].heading or "Section", page,
                               join_units(with_entry_names(body)))
                       for i, (_, body, page) in enumerate(groups))


def join_units(units: list[Sentence]) -> str:
    """Units as one text: sentences run on with a space, a line starts on a line of its own
    (and so does whatever follows a line or an introduced block)."""
    out = ""
    for i, u in enumerate(units):
        apart = i and (u.kind in ("line", "entry") or units[i - 1].kind not in ("sentence", "entry"))
        out += ("\n" if apart else " " if i else "") + u.text
    return out
