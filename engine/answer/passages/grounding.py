"""Where an answer stands in the manual: the routed sections' sentences ranked against the
question, the quote chosen from them (``engine.answer.passages.quote``), the evidence lines of a generated
answer (``engine.answer.passages.evidence``), and the pages they are on
(``engine.answer.passages.pages``)."""
from __future__ import annotations

from engine.answer.passages import quote as quoting
from engine.answer.passages import sentences as sentence_evidence
from engine.answer.passages.sections import entry_lead, heading_path, routed_sections
from engine.answer.passages.evidence import EvidenceLine, Section, evidence_lines
from engine.answer.passages.pages import locate_page, pages_lookup
from engine.answer.passages import expansion, ranking
from engine.answer.passages import rerank as second_stage
from engine.answer.question import Question
from engine.answer.request import Request
from engine.answer.passages.passage_index import index_for
from engine.answer.passages.inventory import asks_for_a_name, inventory_for
from engine.answer.passages.inventory import Kept, extra_sections as inventory_extra
from engine.answer.passages.unit_vectors import SENTENCES, quote_kind, stored_encoder


def sections(routing, trees: dict, cited: list[int]) -> list[Section]:
    """The cited nodes as evidence sections (``engine.answer.passages.sections.routed_sections``)."""
    return [Section(s.doc_id, s.node_id, routing.title[s.rid], s.node.text, s.node.page_start,
                    s.node.page_end) for s in routed_sections(routing, trees, cited)]


def manual_sentences_encoder(rt, trees: dict):
    """The encoder of the manual's sentences read after the answer (its evidence lines, the
    check's similarity): their vectors stored per document and read back (``unit_vectors``,
    kind ``SENTENCES``); None without an encoder."""
    if rt.encoder is None:
        return None
    return stored_encoder(rt, [d for d in trees if d is not None], SENTENCES)


def answer_evidence(rt, routing, trees: dict, text: str, cited: list[int]) -> list[EvidenceLine]:
    """The evidence lines of an answer from its cited nodes (engine.answer.passages.evidence)."""
    found = sections(routing, trees, cited)
    if not found or not text.strip():
        return []
    lines = evidence_lines(rt.encoder, text, found, pages_of=pages_lookup(rt),
                           manual_encoder=manual_sentences_encoder(rt, trees))
    for line in lines:
        line.page_label = page_label(trees, line.doc_id, line.page)
    return lines


def quote_bar(rt, threshold: float | None) -> float:
    """The least score a quote (and a unit of the reader's context) needs: ``threshold`` when
    given, else the ranker's own bar, else ``sentences.THRESHOLD``."""
    if threshold is not None:
        return threshold
    ranker = rt.learned("passage_ranker")
    return ranker.threshold if ranker is not None else sentence_evidence.THRESHOLD


def ranked_sentences(rt, routing, trees: dict, q: Question,
                     route) -> list[sentence_evidence.Sentence]:
    """The candidate passages scored against the question, best first: with the passage ranker
    (engine.answer.passages.ranking) the routed sections' units and the flat passage BM25's best over
    each whole manual, else the routed sections' units by the linear score
    (engine.answer.passages.sentences), with the question's dense vector when routing had it.
    Front and back matter only when the question asks for it (engine.document.matter)."""
    if route is None:
        return []
    found = [sentence_evidence.SectionText(
        rid=s.rid, doc_id=s.doc_id, node_id=s.node_id,
        heading=heading_path(s.tree, s.node_id) or routing.title[s.rid], body=s.node.text,
        page_start=s.node.page_start, page_end=s.node.page_end, lead=entry_lead(s.tree, s.node))
        for s in routed_sections(routing, trees, sorted(route.selected),
                                 q.matter)]
    if getattr(rt.settings, "quote_inventory", False) and asks_for_a_name(q.kind):
        found += inventory_sections(rt, routing, trees, q, found)
    routed = sentence_evidence.candidates(found)
    ranker = rt.learned("passage_ranker")
    # the manual's texts are read from the library's stored vectors (engine.answer.passages.unit_vectors)
    docs = [d for d in trees if d is not None]
    encoder = (stored_encoder(rt, docs, quote_kind(ranker is not None))
               if rt.encoder is not None else None)
    if ranker is None or encoder is None:
        bonus = expansion_bonus(rt, trees, q, routed)
        rule = sentence_evidence.ScoreRule(
            code_weight=sentence_evidence.CODE_WEIGHT
            if getattr(rt.settings, "quote_code_prior", False) else 0.0)
        return sentence_evidence.score(encoder, q, routed, rule,
                                       sentence_evidence.Expanded(bonus=bonus))
    indexes = {d: index_for(rt.cache, d, rt.library.get_document(d).sha256, tree)
               for d, tree in trees.items()}
    rid = {o: i for i, o in enumerate(routing.origin)}
    manuals = ranking.Manuals(indexes, lambda d, n: rid[(d, n)],
                              {d: t.pages for d, t in trees.items()})
    ranked, _ = ranking.rank(ranker, encoder, q, routed, manuals)
    return ranked


def expansion_bonus(rt, trees: dict, q: Question, routed: list) -> list[float] | None:
    """Each routed unit's share of the score from entry expansion (``Settings.quote_expansion``,
    ``engine.answer.passages.expansion``); None when it is off. The index terms are read for a
    question about one document (its back-of-book index, built once per runtime)."""
    source = getattr(rt.settings, "quote_expansion", "none")
    if source == "none" or not routed:
        return None
    index, docs = None, [d for d in trees if d is not None]
    if "index" in source and len(docs) == 1:
        d = docs[0]
        back = expansion.back_index_for(rt.cache, d, rt.library.get_document(d).sha256, trees[d])
        index = expansion.PagedIndex(back, sentence_pager(rt))
    return expansion.bonus(q, routed, source, index)


def inventory_sections(rt, routing, trees: dict, q: Question,
                       found: list) -> list[sentence_evidence.SectionText]:
    """The sections of each manual's best named entries for a name question that the walk did
    not keep (``engine.answer.passages.inventory``)."""
    rid = {o: i for i, o in enumerate(routing.origin)}
    extra = []
    for d, tree in trees.items():
        if d is None:
            continue
        sha = rt.library.get_document(d).sha256
        inv = inventory_for(rt.cache, d, sha, tree, index_for(rt.cache, d, sha, tree))
        routed = {s.node_id for s in found if s.doc_id == d}
        extra += inventory_extra(tree, inv, q, Kept(d, routed, lambda n, d=d: rid[(d, n)]))
    return extra


def sentence_pager(rt):
    """``page_of(sentence)``: the physical 1-based page where a sentence begins (its section's
    first page when the section is one page; None when unknown: never guessed)."""
    pages_of = pages_lookup(rt)

    def page_of(s: sentence_evidence.Sentence) -> int | None:
        if s.page_start is None or s.page_end is None or s.page_end <= s.page_start:
            return s.page_start
        return locate_page(s.text, s.page_start, s.page_end, pages_of(s))

    return page_of


def find_quote(req: Request, timings: dict | None = None,
               ) -> tuple[list[sentence_evidence.Sentence], quoting.Quote | None]:
    """(the request's ranked sentences, the quote or None below the bar: ``quote_bar`` of its
    ``quote_threshold``). With the second stage on (``Settings.quote_rerank``) its best
    candidates are reordered first (``engine.answer.passages.rerank``); ``timings`` gets its
    "rerank_ms" and "rerank_tokens"."""
    rt, trees, question = req.rt, req.trees, req.question
    bar = quote_bar(rt, req.opts.quote_threshold)
    ranked = ranked_sentences(rt, req.routing, trees, question, req.route)
    scorer = second_stage.scorer_for(rt)
    if scorer is not None:
        done = second_stage.rerank(scorer, question, ranked, bar)
        ranked = done.ranked
        if timings is not None:
            timings.update(rerank_ms=done.ms, rerank_tokens=done.tokens)
    quote = quoting.choose(ranked, bar, sentence_pager(rt))
    if quote is not None and quote.doc_id in trees:
        tree = trees[quote.doc_id]
        quote.page_label = tree.page_label(quote.page)
        quote.ocr = tree.is_ocr(tree.node(quote.node_id))
    return ranked, quote


def find_passages(rt, trees: dict, ranked: list, quote, threshold: float | None) -> list:
    """The quote and up to two more passages of other entries (``quote.passages``), each with
    its page's printed label and OCR mark."""
    found = quoting.passages(quote, ranked, quote_bar(rt, threshold), sentence_pager(rt))
    for p in found[1:]:
        tree = trees.get(p.doc_id)
        if tree is not None:
            p.page_label = tree.page_label(p.page)
            p.ocr = tree.is_ocr(tree.node(p.node_id))
    return found


def page_label(trees: dict, doc_id: int | None, page: int | None) -> str | None:
    """The printed label of a physical page of a document (None: none, or unknown)."""
    tree = trees.get(doc_id)
    return tree.page_label(page) if tree is not None else None


def label_citations(citations: list, trees: dict) -> list:
    """The citations with their first page's printed label and their OCR mark filled in."""
    for c in citations:
        tree = trees.get(c.doc_id)
        if tree is not None and tree.graph.has_node(c.node_id):
            c.page_label = tree.page_label(c.page_start)
            c.ocr = tree.is_ocr(tree.node(c.node_id))
    return citations
