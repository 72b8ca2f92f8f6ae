"""The manual's entry inventory: every named entry (a command, option, key, function or
statement with its signature line) of the whole manual, matched for a question that asks for a
name (issue 66).

The walk keeps 40-60 sections of a big manual; the entry a name question asks for ("which
option ...", "how do I ... in the input file") may lie in a section it dropped. The inventory
holds each entry's opening unit (``units.Unit`` kind "entry": its signature and the first
sentence of its description; ``passage_index.PassageIndex`` reads the units as the quote does)
with a BM25 over its name read as words (``engine.routing.identifiers.as_words``, twice: the
name counts as the entry's heading) and its opening. For a question of a name type
(``answer_type.NAME_TYPES``) the sections of its ``TOP`` best entries join the routed
sections, and the linear score (``sentences.score``) ranks their units with the others.
Built once per document and runtime (``inventory_for``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from engine.answer.passages.answer_type import NAME_TYPES
from engine.answer.passages.passage_index import PassageIndex, per_document
from engine.answer.passages.sections import CONTEXT_EXCLUDED_KINDS, entry_lead, heading_path
from engine.answer.passages.sentences import SectionText
from engine.answer.question import Question
from engine.routing import lexical
from engine.routing.identifiers import as_words

TOP = 4  # entries whose sections join the routed ones (set before measuring)


@dataclass
class Inventory:
    """One document's named entries: (node id, unit index, name, opening text) and a BM25."""

    entries: list[tuple[int, int, str, str]]
    lexical: lexical.LexicalIndex

    @classmethod
    def build(cls, index: PassageIndex) -> "Inventory":
        entries, rows = [], []
        for p in index.passages:
            if p.kind != "entry" or not p.entry or not p.text.startswith(p.entry):
                continue
            if index.kinds.get(p.node_id) in CONTEXT_EXCLUDED_KINDS:
                continue  # front and back matter (an index repeats every name)
            name = as_words(p.entry)
            entries.append((p.node_id, p.index, p.entry, p.text))
            rows.append(lexical.tokenize(name) * 2 + lexical.tokenize(p.text))
        return cls(entries, lexical.LexicalIndex(rows) if rows else None)

    def best(self, tokens: list[str], n: int = TOP) -> list[int]:
        """Node ids of the sections of the ``n`` best entries for the question's tokens."""
        if self.lexical is None or not tokens:
            return []
        sc = self.lexical.scores(tokens)
        out: list[int] = []
        for j in np.argsort(-sc, kind="stable"):
            if sc[j] <= 0 or len(out) >= n:
                break
            if self.entries[j][0] not in out:
                out.append(self.entries[j][0])
        return out


def asks_for_a_name(kind: str | None) -> bool:
    """Whether a question of this answer type (``answer_type.question_type``) asks for a name."""
    return kind in NAME_TYPES


def inventory_for(cache: dict, doc_id, sha256, tree, index: PassageIndex) -> Inventory:
    """The document's inventory from a runtime's ``cache``, built on first use."""
    return per_document(cache, "entry_inventory", doc_id, sha256, tree,
                        lambda: Inventory.build(index))


@dataclass(frozen=True)
class Kept:
    """What the walk kept of one manual: its document id, the node ids of its routed sections,
    and the routing id of one of its nodes (``rid_of(node id)``)."""

    doc_id: int | None
    routed: set[int]
    rid_of: Callable[[int], int]


def extra_sections(tree, inventory: Inventory, question: Question, kept: Kept,
                   n: int = TOP) -> list[SectionText]:
    """The sections of the question's best entries that the walk did not keep, as routed
    sections."""
    out = []
    for node_id in inventory.best(list(question.tokens), n):
        if node_id in kept.routed:
            continue
        node = tree.node(node_id)
        out.append(SectionText(rid=kept.rid_of(node_id), doc_id=kept.doc_id, node_id=node_id,
                               heading=heading_path(tree, node_id) or node.title, body=node.text,
                               page_start=node.page_start, page_end=node.page_end,
                               lead=entry_lead(tree, node)))
    return out
