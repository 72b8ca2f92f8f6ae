"""The flat passage channel: every unit of a whole manual in one BM25 index, beside the walk.

The walk keeps 40-60 sections on a big manual and may still miss the one that answers; a plain
BM25 over the manual's passages often has it (issue 42: the right page in BM25's top three for
five of eight questions where the quote missed). ``PassageIndex`` holds each readable node's
units (``engine.answer.passages.units.split_units``, the quote's own units) with its heading path,
and a BM25 over them (``engine.routing.lexical``: the lexical channel's tokens and bm25s; the
unit's tokens joined with its heading path, as the routed units are scored). ``top`` gives the
best ``FLAT_TOP`` passages of a question: candidates the second stage sees whether or not their
section was routed (``engine.answer.passages.ranking``). ``sections`` is a BM25 over whole sections
(heading path + text), the section score the ranker reads for every candidate alike.

Built lazily per document and kept per runtime keyed by the document's content hash
(``index_for``); building it on ngspice's 715 pages is measured in docs/results.md.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from engine.answer.passages.sections import (CONTEXT_EXCLUDED_KINDS, entry_lead, heading_path,
                                             readable)
from engine.answer.passages.units import split_units
from engine.answer.passages.sentences import Sentence
from engine.document.matter import matter_kind
from engine.routing import lexical

FLAT_TOP = 16  # flat candidates per question (the issue: BM25's top three held the page often)
CACHED = 8  # documents whose passage index a runtime keeps


@dataclass
class PassageIndex:
    """One document's units (``rid`` -1: a passage is placed in a route when it is used)."""

    passages: list[Sentence]
    lexical: lexical.LexicalIndex
    sections: lexical.LexicalIndex  # one row per node in ``section_ids``
    section_ids: list[int]
    place: dict[tuple[int, int], int]  # (node id, unit index) -> passage number
    kinds: dict[int, str]  # node id -> node kind (front and back matter flagged)

    @classmethod
    def build(cls, doc_id: int | None, tree) -> "PassageIndex":
        passages: list[Sentence] = []
        rows, sec_rows, sec_ids, kinds = [], [], [], {}
        for node in tree.preorder():
            if not node.text.strip() or not readable(node, with_matter=True):
                continue
            heading = heading_path(tree, node.id) or node.title
            title = heading.split(" > ")[-1] if heading else ""
            # a tree stored before the shape rules existed is judged here (engine.document.matter)
            kinds[node.id] = node.kind if node.kind in CONTEXT_EXCLUDED_KINDS else (
                matter_kind(node.text, node.page_start, tree.pages, node.title) or node.kind)
            sec_ids.append(node.id)
            sec_rows.append(lexical.evidence_tokens([heading], node.text, title_boost=1))
            lead = entry_lead(tree, node)
            for i, u in enumerate(split_units(node.text, title)):
                goes_on = lead if lead and not u.entry and u.para == 0 else ""
                passages.append(Sentence(rid=-1, doc_id=doc_id, node_id=node.id, heading=heading,
                                         index=i, text=u.text, page_start=node.page_start,
                                         page_end=node.page_end, kind=u.kind, leans=u.leans,
                                         head=u.head, entry=u.entry or goes_on.split("\n")[0],
                                         lead=goes_on))
                rows.append(lexical.evidence_tokens([passages[-1].path], u.text, title_boost=1))
        place = {(p.node_id, p.index): j for j, p in enumerate(passages)}
        return cls(passages, lexical.LexicalIndex(rows), lexical.LexicalIndex(sec_rows), sec_ids,
                   place, kinds)

    def scores(self, tokens: list[str]) -> np.ndarray:
        """BM25 of every passage for the question's tokens."""
        return self.lexical.scores(tokens) if len(self.passages) else np.zeros(0, np.float32)

    def section_scores(self, tokens: list[str]) -> dict[int, float]:
        """Node id -> its section's BM25 divided by the best section's (0..1)."""
        sc = self.sections.scores(tokens) if self.section_ids else np.zeros(0, np.float32)
        best = float(sc.max()) if len(sc) else 0.0
        return {n: (float(s) / best if best > 0 else 0.0) for n, s in zip(self.section_ids, sc)}

    def top(self, scores: np.ndarray, n: int = FLAT_TOP) -> list[int]:
        """Passage numbers of the ``n`` best scores above 0, best first."""
        order = np.argsort(-scores, kind="stable")[:n]
        return [int(j) for j in order if scores[j] > 0]

    def section_units(self, node_id: int) -> list[Sentence]:
        """Every unit of one section (copies, ``rid`` unset), in order."""
        out, i = [], 0
        while (j := self.place.get((node_id, i))) is not None:
            out.append(replace(self.passages[j]))
            i += 1
        return out


def per_document(cache: dict, name: str, doc_id, sha256: str | None, tree, build):
    """``build()`` for one document, kept in ``cache[name]`` (a runtime's) for the ``CACHED``
    most recent documents; keyed by the document and its content hash (a database may reuse a
    deleted document's id)."""
    store = cache.setdefault(name, {})
    key = (doc_id, sha256 or id(tree))
    if key not in store:
        if len(store) >= CACHED:
            store.pop(next(iter(store)))
        store[key] = build()
    return store[key]


def index_for(cache: dict, doc_id: int | None, sha256: str | None, tree) -> PassageIndex:
    """The document's passage index from ``cache`` (a runtime's), built on first use."""
    return per_document(cache, "passage_index", doc_id, sha256, tree,
                        lambda: PassageIndex.build(doc_id, tree))
