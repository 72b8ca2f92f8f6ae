"""The second stage: candidate passages ranked with the question by a learned model.

Candidates (``pool``): every unit of the routed sections (channel "routed") plus the flat
passage BM25's best ``passage_index.FLAT_TOP`` over the whole manual (channel "flat"; "both"
when a routed unit is among them). A flat passage whose section was not routed brings its
section's other units along (the quote's continuation reads them). Front and back matter
(``engine.document.matter``) is left out unless the question asks for it.

Features (``FEATURES``, one row per candidate; ``features``): the BM25 of the unit within the
pool and over the whole manual (score / best and 1 / (1 + rank)), which channels found it,
the all-MiniLM-L6-v2 cosine of the question to "heading path: unit" and to the heading path
alone, the heading match, the answer type (``engine.answer.passages.answer_type``) and the unit's kind,
the share of the question's identifiers and of its words in the unit, a number where a default
or a quantity is asked, the unit's position in its section and the section's in the manual,
its length, the front/back-matter flag, the section's BM25, and both cosines less the best
among the question's candidates (a pointwise model then sees how a unit stands among them). Only the ``ENCODED`` best units
by pool BM25 and every flat candidate are encoded and scored; the rest keep score 0.

The model (``PassageRanker``): a logistic regression over standardised features (scikit-learn,
fitted by ``engine.training.passage_ranker``) stored as JSON in ``assets/passage_ranker.json``
with its card ``assets/PASSAGE_RANKER_CARD.md``; its probability is the unit's ``score``.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from engine.answer.logistic import Logistic
from engine.answer.passages.answer_type import DEFINITION, HOWTO, OPTION, SYNTAX, fits
from engine.answer.question import Question
from engine.answer.passages.sections import CONTEXT_EXCLUDED_KINDS
from engine.answer.passages.passage_index import FLAT_TOP, PassageIndex
from engine.answer.passages.sentences import ENCODED, Sentence, heading_match
from engine.routing import lexical

FEATURES = ("pool_bm25", "pool_rank", "flat_bm25", "flat_rank", "routed", "flat", "cosine",
            "head_cosine", "heading_match", "type_fit", "is_line", "is_intro", "q_howto",
            "q_option", "q_syntax", "q_definition", "q_default", "ident_overlap", "word_overlap",
            "number_cue", "position", "section_place", "words", "short", "matter",
            "section_bm25", "cosine_gap", "head_cosine_gap")

_IDENT = re.compile(r"(?:\\|--?)?[A-Za-z_][\w.:@-]*[\w]")
_DEFAULT_Q = re.compile(r"\b(default|how (many|much|long)|maximum|minimum|limit|size|number of)\b",
                        re.I)
_DIGIT = re.compile(r"\d")
_LEADER = re.compile(r"(?:\.\s?){4,}\s*\d+\s*$", re.M)


@dataclass
class Candidate:
    """A passage with where it came from (the rank reason the Ask tab shows)."""

    sentence: Sentence
    routed: bool
    flat: bool
    section_kind: str = "section"

    @property
    def channel(self) -> str:
        return "both" if self.routed and self.flat else "routed section" if self.routed else (
            "flat BM25" if self.flat else "section of a flat passage")


def identifiers(text: str) -> set[str]:
    """Identifier-like words (a backslash, dash, underscore, dot, digit or inner capital)."""
    out = set()
    for w in _IDENT.findall(text or ""):
        if re.search(r"[\\_.:@\d-]|[a-z][A-Z]", w) or (w.isupper() and len(w) > 1):
            out.add(w.lower().strip(".:-"))
    return {w for w in out if len(w) > 1}


@dataclass(frozen=True)
class Manuals:
    """The manuals the ranker reads beside the routed units: their flat passage indexes
    ({doc_id: PassageIndex}), the routed id of a node (``rid_of(doc_id, node_id)``) and their
    page counts ({doc_id: pages})."""

    indexes: dict
    rid_of: Callable[[int, int], int]
    pages: dict


@dataclass(frozen=True)
class CandidateScores:
    """What the features read of the chosen candidates: their cosines to the question and
    their headings' (in ``chosen`` order), the pool's BM25 (every candidate), the question's
    flat BM25 per document ({doc_id: scores over its passages}) and its section BM25
    ({(doc_id, node_id): score})."""

    cos: np.ndarray
    head_cos: np.ndarray
    pool_bm: np.ndarray
    flat_scores: dict
    section_scores: dict


def pool(routed: list[Sentence], manuals: Manuals, question: Question
         ) -> tuple[list[Candidate], dict]:
    """The candidates (module docstring) and the question's flat BM25 per document
    ({doc_id: scores over its passages})."""
    q, indexes, rid_of = question, manuals.indexes, manuals.rid_of
    tokens = list(q.tokens)
    with_matter = q.matter
    out = [Candidate(s, True, False) for s in routed]
    at = {(s.doc_id, s.node_id, s.index): c for s, c in zip(routed, out)}
    texts = {s.text for s in routed}
    flat_scores = {}
    for doc_id, index in indexes.items():
        sc = index.scores(tokens)
        flat_scores[doc_id] = sc
        for j in index.top(sc, FLAT_TOP):
            p = index.passages[j]
            kind = index.kinds.get(p.node_id, "section")
            if kind in CONTEXT_EXCLUDED_KINDS and not with_matter:
                continue
            if (doc_id, p.node_id, p.index) in at:
                at[(doc_id, p.node_id, p.index)].flat = True
                continue
            rid = rid_of(doc_id, p.node_id)
            for u in index.section_units(p.node_id):  # the section comes along (continuation)
                key = (doc_id, u.node_id, u.index)
                if key in at or u.text in texts:
                    continue
                u.rid = rid
                cand = Candidate(u, False, u.index == p.index, kind)
                at[key] = cand
                texts.add(u.text)
                out.append(cand)
    for c in out:
        if c.routed and c.sentence.doc_id in indexes:
            c.section_kind = indexes[c.sentence.doc_id].kinds.get(c.sentence.node_id, "section")
    if not with_matter:  # a stored tree's matter the index judged (passage_index)
        out = [c for c in out if c.section_kind not in CONTEXT_EXCLUDED_KINDS]
    for i, c in enumerate(out):
        c.sentence.order = i
    return out, flat_scores


def features(question: Question, cands: list[Candidate], chosen: list[int],
             scores: CandidateScores, manuals: Manuals) -> np.ndarray:
    """One row of ``FEATURES`` per chosen candidate (module docstring)."""
    q, indexes, pages = question, manuals.indexes, manuals.pages
    cos, head_cos, pool_bm = scores.cos, scores.head_cos, scores.pool_bm
    flat_scores, section_scores = scores.flat_scores, scores.section_scores
    qtype, qtok = q.kind, set(q.tokens)
    qid = identifiers(q.text)
    default_q = bool(_DEFAULT_Q.search(q.text))
    best_pool = float(pool_bm.max()) if len(pool_bm) else 0.0
    pool_rank = np.empty(len(pool_bm), dtype=np.int64)
    pool_rank[np.argsort(-pool_bm, kind="stable")] = np.arange(len(pool_bm))
    flat_rank, flat_best = {}, {}
    for d, sc in flat_scores.items():
        r = np.empty(len(sc), dtype=np.int64)
        r[np.argsort(-sc, kind="stable")] = np.arange(len(sc))
        flat_rank[d], flat_best[d] = r, (float(sc.max()) if len(sc) else 0.0)
    best_cos = float(np.max(cos)) if len(cos) else 0.0
    best_head = float(np.max(head_cos)) if len(head_cos) else 0.0
    rows = []
    for k, i in enumerate(chosen):
        c = cands[i]
        s = c.sentence
        index: PassageIndex | None = indexes.get(s.doc_id)
        j = index.place.get((s.node_id, s.index)) if index is not None else None
        fb = float(flat_scores[s.doc_id][j]) / flat_best[s.doc_id] if (
            j is not None and flat_best[s.doc_id] > 0) else 0.0
        fr = 1.0 / (1 + flat_rank[s.doc_id][j]) if j is not None else 0.0
        low = s.text.lower()
        words = len(s.text.split())
        stok = set(lexical.tokenize(s.text))
        n_pages = pages.get(s.doc_id) or 0
        rows.append([
            float(pool_bm[i]) / best_pool if best_pool > 0 else 0.0,
            1.0 / (1 + pool_rank[i]), fb, fr, float(c.routed), float(c.flat),
            float(cos[k]), float(head_cos[k]), heading_match(qtok, s.path),
            float(fits(qtype, s.kind, s.text)), float(s.kind == "line"), float(s.kind == "intro"),
            float(qtype == HOWTO), float(qtype == OPTION), float(qtype == SYNTAX),
            float(qtype == DEFINITION), float(default_q),
            sum(w in low for w in qid) / len(qid) if qid else 0.0,
            len(qtok & stok) / max(1, len(qtok)),
            float(default_q and bool(_DIGIT.search(s.text))),
            1.0 / (1 + s.index),
            (s.page_start or 0) / n_pages if n_pages else 0.0,
            math.log1p(words), float(words < 4),
            float(c.section_kind in CONTEXT_EXCLUDED_KINDS or bool(_LEADER.search(s.text))),
            section_scores.get((s.doc_id, s.node_id), 0.0),
            float(cos[k]) - best_cos, float(head_cos[k]) - best_head])
    return np.asarray(rows, dtype=np.float32).reshape(len(chosen), len(FEATURES))


def encode_and_describe(encoder, question: Question, cands: list[Candidate], manuals: Manuals,
                        flat_scores: dict) -> tuple[list[int], np.ndarray]:
    """(the candidates scored: the ``ENCODED`` best by pool BM25 and every flat one, their
    feature rows); shared by the ranker at ask time and the training data builder. The
    question's vector is its ``dense`` when routing encoded it already."""
    if not cands:
        return [], np.zeros((0, len(FEATURES)), np.float32)
    q, encoded, query_vec = question, ENCODED, question.dense
    sents = [c.sentence for c in cands]
    idx = lexical.LexicalIndex([lexical.evidence_tokens([s.path], s.text, title_boost=1)
                                for s in sents])
    pool_bm = idx.scores(list(q.tokens))
    order = np.argsort(-pool_bm, kind="stable")
    chosen = list(dict.fromkeys([int(i) for i in order[:encoded]]
                                + [i for i, c in enumerate(cands) if c.flat]))
    texts = [f"{sents[i].path}: {sents[i].text}" if sents[i].path else sents[i].text
             for i in chosen]
    heads = sorted({sents[i].path for i in chosen})
    vecs = encoder.encode(texts + heads)
    qv = query_vec if query_vec is not None else encoder.encode_query(q.text)
    cos = vecs[:len(texts)] @ qv
    hv = dict(zip(heads, vecs[len(texts):] @ qv))
    head_cos = np.asarray([hv[sents[i].path] if sents[i].path else 0.0 for i in chosen])
    tokens = list(q.tokens)
    section_scores = {}
    for d, index in manuals.indexes.items():
        section_scores.update({(d, n): v for n, v in index.section_scores(tokens).items()})
    return chosen, features(q, cands, chosen, CandidateScores(
        cos, head_cos, pool_bm, flat_scores, section_scores), manuals)


@dataclass(frozen=True)
class PassageRanker(Logistic):
    """A logistic regression over standardised ``FEATURES`` (module docstring); its threshold is
    the least probability a quote needs (the card says how it was set)."""

    @classmethod
    def load(cls, path: Path) -> "PassageRanker":
        return cls.load_checked(path, FEATURES)


def rank(ranker: PassageRanker, encoder, question: Question, routed: list[Sentence],
         manuals: Manuals) -> tuple[list[Sentence], dict[int, Candidate]]:
    """Every candidate, ``score`` = the ranker's probability (0 for those not scored), best
    first; and the candidates by ``id`` of their sentence (their channels)."""
    q = question
    cands, flat_scores = pool(routed, manuals, q)
    if not cands:
        return [], {}
    chosen, rows = encode_and_describe(encoder, q, cands, manuals, flat_scores)
    probs = ranker.probabilities(rows)
    for c in cands:
        c.sentence.score, c.sentence.channel = 0.0, c.channel
    for i, p, row in zip(chosen, probs, rows):
        s = cands[i].sentence
        s.score = round(float(p), 4)
        s.cosine, s.lexical = round(float(row[6]), 4), round(float(row[0]), 4)
    ranked = sorted((c.sentence for c in cands), key=lambda s: (-s.score, s.order))
    return ranked, {id(c.sentence): c for c in cands}

