"""Evaluation metrics shared by the benches (../shared/bench/README.md, "Metrics").

- Gold resolution: a question's gold items become node ids of the document's tree. ORD-QA: the
  node(s) whose ``ref`` is the reference chunk id. Manuals: the node whose cleaned title equals
  the cleaned gold title AND whose start page equals the gold page (titles repeat, e.g.
  etoolbox's "Definitions" on pages 2 and 6).
- Routing hit: a gold item is reached when some selected/retrieved node is the gold node or lies
  inside its subtree. Per question: ``coverage`` = fraction of gold items reached, ``hit`` =
  at least one reached, ``full`` = all reached.
- Answer quality: ROUGE-L F (rouge-score, stemming) and SQuAD-style token F1 against ``answer``.
- Key terms: the reference answer's identifiers, commands, options, file names, numbers and code
  spans (``engine.answer.checks.terms``) and the share of them a text holds (``term_recall``): the
  quote's (``quote_terms``) and the answer's (``answer_terms``).
"""
from __future__ import annotations

import re
import statistics
import string
from collections import Counter
from typing import Iterable

from engine.routing.hits import HitResult, gold_regions, routing_hit  # noqa: F401 (re-exported)
from engine.answer.checks import terms as key_terms
from engine.document.tree import Tree, clean_title

# -- gold ----------------------------------------------------------------------------------------


def ordqa_gold(tree: Tree, references: Iterable[str]) -> list[set[int]]:
    """One set of node ids per reference chunk id (every node carrying that ref; empty if none)."""
    by_ref: dict[str, set[int]] = {}
    for n in tree.preorder():
        if n.ref:
            by_ref.setdefault(n.ref, set()).add(n.id)
    return [set(by_ref.get(r, set())) for r in references]


def manual_gold(tree: Tree, gold: Iterable[dict]) -> list[set[int]]:
    """One set of node ids per gold {title, page}: title (cleaned) and start page must both match."""
    out = []
    nodes = list(tree.preorder())
    for g in gold:
        title = clean_title(g["title"])
        out.append({n.id for n in nodes
                    if clean_title(n.title) == title and n.page_start == g.get("page")})
    return out


# -- answer quality ------------------------------------------------------------------------------

_scorer = None


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure (rouge-score, Porter stemming), in [0, 1]."""
    global _scorer
    if _scorer is None:
        from rouge_score import rouge_scorer

        _scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    return _scorer.score(reference or "", prediction or "")["rougeL"].fmeasure


def normalize_answer(s: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    s = (s or "").lower()
    s = "".join(ch if ch not in set(string.punctuation) else " " for ch in s)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD-style token F1 in [0, 1] (1.0 when both normalise to empty)."""
    p, r = normalize_answer(prediction).split(), normalize_answer(reference).split()
    if not p or not r:
        return float(p == r)
    common = Counter(p) & Counter(r)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(r)
    return 2 * precision * recall / (precision + recall)


def term_recall(reference: str, text: str | None) -> float | None:
    """Share of the reference's key terms (``engine.answer.checks.terms``) found in ``text`` (no text:
    0); None when the reference has no key term."""
    return key_terms.recall(key_terms.key_terms(reference), text or "")


def clean_reference(answer: str) -> str:
    """ORD-QA answers carry a literal two-character "\\n" where a newline was meant."""
    return (answer or "").replace("\\n", "\n")


# -- aggregation ---------------------------------------------------------------------------------


def median(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


# -- evidence lines ------------------------------------------------------------------------------


def evidence_precision(rows: Iterable[dict], thresholds: Iterable[float], max_lines: int = 3,
                       correct_f1: float = 0.3) -> list[dict]:
    """Precision of the evidence lines a threshold would show, on text-mode rows that carry
    ``evidence_all`` ([node_id, score, in_gold] per sentence of the packed sections, best
    first). ``precision``: shown lines whose sentence lies in a gold section (the section the
    reference answer comes from); ``strict``: the same AND the answer is correct (token F1 >=
    ``correct_f1``), a line under a wrong answer counting as wrong. ``answers``: the fraction
    of answers that get at least one line."""
    rows = [r for r in rows if r.get("evidence_all") is not None]
    out = []
    for t in thresholds:
        shown = gold = strict = with_line = 0
        for r in rows:
            ok = (r.get("token_f1") or 0) >= correct_f1
            lines = [e for e in r["evidence_all"] if e[1] >= t][:max_lines]
            shown += len(lines)
            gold += sum(1 for e in lines if e[2])
            strict += sum(1 for e in lines if ok and e[2])
            with_line += bool(lines)
        out.append({"threshold": t, "lines": shown, "precision": gold / shown if shown else None,
                    "strict": strict / shown if shown else None,
                    "answers": with_line / len(rows) if rows else None, "n": len(rows),
                    "correct": sum(1 for r in rows if (r.get("token_f1") or 0) >= correct_f1)})
    return out


# -- the answer check ----------------------------------------------------------------------------

# An answer holds the reference's key terms when it has at least this share of them (recall;
# the benches report two bars: some of them, and at least half).
HELD = (1e-9, 0.5)


def check_rates(rows: Iterable[dict], held_at: float = HELD[1]) -> dict:
    """The answer check against the references, over generated rows with ``flagged`` (bool) and
    ``answer_terms`` (``answer_terms``): ``flagged``, the share of answers flagged; ``held_flagged``
    and ``held_unflagged``, how often a flagged and an unflagged answer holds the reference's key
    terms (a recall of at least ``held_at``; rows whose reference has none are left out of
    these); ``flagged_of_held``, the share of the answers holding them that are flagged;
    ``recall_flagged`` and ``recall_unflagged``, the mean recall of each."""
    rows = [r for r in rows if r.get("flagged") is not None]
    judged = [r for r in rows if r.get("answer_terms") is not None]
    held = [r for r in judged if r["answer_terms"] >= held_at]

    def share(part: list, whole: list) -> float | None:
        return len(part) / len(whole) if whole else None

    flagged = [r for r in judged if r["flagged"]]
    unflagged = [r for r in judged if not r["flagged"]]
    return {"n": len(rows), "n_flagged": sum(1 for r in rows if r["flagged"]),
            "flagged": share([r for r in rows if r["flagged"]], rows),
            "n_judged": len(judged), "n_held": len(held),
            "held_flagged": share([r for r in flagged if r["answer_terms"] >= held_at], flagged),
            "held_unflagged": share([r for r in unflagged if r["answer_terms"] >= held_at],
                                    unflagged),
            "flagged_of_held": share([r for r in held if r["flagged"]], held),
            "recall_flagged": mean(r["answer_terms"] for r in flagged),
            "recall_unflagged": mean(r["answer_terms"] for r in unflagged)}
