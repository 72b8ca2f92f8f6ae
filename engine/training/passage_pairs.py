"""Training pairs for the passage ranker (``engine.answer.passages.ranking``): questions about Debian
documentation manuals, each with the passage it was made from, and the ranker's feature rows of
every candidate the engine would weigh for it.

Questions per manual (seeded by the manual's sha256), three kinds:
- ``heading``: a section heading in ``engine.training.data``'s templates and in practical ones
  ("How do I use {heading}?", "What is {heading}?"); positive = every unit of that section;
- ``sentence``: a sentence of the manual (as ``engine.training.data`` draws them) or its content
  words only, in order (a question rarely repeats the manual's sentence); positive = that unit;
- ``practical``: templates shaped like a new user's questions, filled from the unit itself:
  "How do I {verb phrase}?" from "To {verb phrase}, ...", "What is the default {...}?" from a
  unit that names a default, "Which option {...}?" from a unit with an option or a control
  sequence (the option left out), "What does {identifier} do?" from a unit that opens with one;
  positive = that unit.
The routed sections are simulated (no memories for these manuals): the best sections by the
section BM25 (``PassageIndex.section_scores``), their number a tenth of the manual's (4 to 40),
the question's own section among them with probability ``GOLD_ROUTED`` (the router's section
hit on unseen manuals: docs/results.md, "Issue 42: the passage ranker"). Candidates and
features are then exactly the
engine's (``ranking.pool``, ``ranking.encode_and_describe``).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

import numpy as np

from engine.answer.passages.sections import CONTEXT_EXCLUDED_KINDS
from engine.answer.passages.passage_index import PassageIndex
from engine.answer.passages.ranking import FEATURES, Manuals, encode_and_describe, pool
from engine.answer.passages.sentences import SectionText, candidates
from engine.answer.question import Question
from engine.routing import lexical
from engine.training.data import HEADING_TEMPLATES

GOLD_ROUTED = 0.9
PER_MANUAL = {"heading": 6, "sentence": 4, "practical": 12}
PRACTICAL_HEADING = ("How do I use {t}?", "What is {t}?", "How does {t} work?")

_TO_DO = re.compile(r"^To ([a-z][\w\s\\-]{5,60}?),\s")
_DEFAULT = re.compile(r"\bdefault(?: value)?(?: of| for)? ([\w\\.-]+(?: [\w\\.-]+){0,4}?)"
                      r"(?: is| are|,|\.|$)", re.I)
_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*|\\[A-Za-z@]+)")
_OPENS = re.compile(r"^(\\?[A-Za-z_][\w.:-]*\w(?:\(\))?)\s")
_CHANGES = re.compile(r"^(v(ersion)?\s*\d|changes|history|release)", re.I)
_STOP = frozenset(lexical.STOP_WORDS)


@dataclass
class PairQuery:
    question: str
    kind: str
    positives: set[tuple[int, int]]  # (node id, unit index)


def _bare(title: str) -> str:
    """A heading without its number ("A.9 Mapping" -> "Mapping"); "" for a change-log entry."""
    t = re.sub(r"^(?:[A-Z]\.)?[\d.]+\s+", "", " ".join((title or "").split()))
    return "" if _CHANGES.match(t) or len(re.findall(r"[A-Za-z]{3,}", t)) == 0 else t


def make_queries(index: PassageIndex, tree, rng: random.Random) -> list[PairQuery]:
    """The manual's questions (module docstring), at most ``PER_MANUAL`` of each kind."""
    units = [p for p in index.passages if index.kinds.get(p.node_id) not in CONTEXT_EXCLUDED_KINDS]
    by_node: dict[int, list] = {}
    for p in units:
        by_node.setdefault(p.node_id, []).append(p)
    out: list[PairQuery] = []
    nodes = [n for n in by_node if len(_bare(tree.node(n).title)) >= 4]
    for n in rng.sample(nodes, min(len(nodes), PER_MANUAL["heading"])):
        t = _bare(tree.node(n).title)
        template = rng.choice(HEADING_TEMPLATES + PRACTICAL_HEADING)
        out.append(PairQuery(template.format(t=t), "heading",
                             {(n, p.index) for p in by_node[n]}))
    prose = [p for p in units if p.kind == "sentence" and 6 <= len(p.text.split()) <= 40]
    for p in rng.sample(prose, min(len(prose), PER_MANUAL["sentence"])):
        q = p.text
        if rng.random() < 0.6:
            q = " ".join(w for w in p.text.split() if w.lower().strip(".,;:") not in _STOP)
        out.append(PairQuery(q, "sentence", {(p.node_id, p.index)}))
    practical = []
    for p in units:
        if (q := practical_question(p.text, rng)) is not None:
            practical.append(PairQuery(q, "practical", {(p.node_id, p.index)}))
    out += rng.sample(practical, min(len(practical), PER_MANUAL["practical"]))
    return out


def practical_question(text: str, rng: random.Random) -> str | None:
    """A new user's question that this unit answers, from its own words, or None."""
    first = text.split("\n")[0]
    if m := _TO_DO.match(first):
        return f"How do I {m.group(1).strip()}?"
    if (m := _DEFAULT.search(first)) and len(m.group(1).split()) >= 1:
        return f"What is the default {m.group(1).strip()}?"
    if (m := _OPTION.search(text)) and len(first.split()) >= 5:
        rest = " ".join(w for w in first.replace(m.group(1), " ").split()[:12]
                        if w.lower() not in _STOP and re.fullmatch(r"[A-Za-z-]+", w))
        if len(rest.split()) >= 3:
            return rng.choice(("Which option {r}?", "Which command {r}?")).format(r=rest.lower())
    if (m := _OPENS.match(first)) and re.search(r"[\\_.:()]|[a-z][A-Z]", m.group(1)):
        return f"What does {m.group(1)} do?"
    return None


def routed_units(index: PassageIndex, tree, question: str, gold: set[int],
                 rng: random.Random) -> list:
    """The simulated walk's sections' units (module docstring), as ``sentences.candidates``
    gives the engine's."""
    scores = index.section_scores(lexical.tokenize(question))
    k = max(4, min(40, len(scores) // 10))
    best = sorted(scores, key=lambda n: -scores[n])[:k]
    keep = [n for n in best if n not in gold or rng.random() < GOLD_ROUTED]
    if rng.random() < GOLD_ROUTED:
        keep += [n for n in gold if n not in keep]
    sections = []
    for n in keep:
        node = tree.node(n)
        if index.kinds.get(n) in CONTEXT_EXCLUDED_KINDS or not node.text.strip():
            continue
        head = next((p.heading for p in index.section_units(n)), node.title)
        sections.append(SectionText(rid=n, doc_id=0, node_id=n, heading=head, body=node.text,
                                    page_start=node.page_start, page_end=node.page_end))
    return candidates(sections)


def manual_rows(encoder, tree, seed: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """(feature rows, labels, query number per row, the queries) of one manual."""
    rng = random.Random(seed)
    index = PassageIndex.build(0, tree)
    queries = make_queries(index, tree, rng)
    rows, labels, groups = [], [], []
    for qi, q in enumerate(queries):
        routed = routed_units(index, tree, q.question, {n for n, _ in q.positives}, rng)
        asked = Question.read(q.question)
        manuals = Manuals({0: index}, lambda d, n: n, {0: tree.pages})
        cands, flat = pool(routed, manuals, asked)
        chosen, feats = encode_and_describe(encoder, asked, cands, manuals, flat)
        for i, row in zip(chosen, feats):
            s = cands[i].sentence
            rows.append(row)
            labels.append((s.node_id, s.index) in q.positives)
            groups.append(qi)
    return (np.asarray(rows, np.float32).reshape(len(rows), len(FEATURES)),
            np.asarray(labels, bool), np.asarray(groups, np.int32), queries)
