"""Fit the short answer's term scorer (engine.answer.passages.short_answer) on the dev probe's
passages, one manual left out at a time, and write the shipped model and its card.

    python -m bench.probe_stage --linear-only --out out/ps      # the passages, per question
    python -m bench.short_answer_fit --rows out/ps/rows.jsonl [--precision 0.75] [--write]

A candidate term is labelled right when it holds the question's key (the probe's regex,
``engine.answer.evaluation.holds``), or its line does with the term inside the key's match
(``right``). For each manual the model is fitted on the other manuals'
candidates and its threshold chosen on them by an inner leave-one-manual-out (the lowest score
whose given short answers are right at least ``--precision`` of the time); the held-out
manual's questions are then answered with it. The figures printed are those held-out answers.
``--write`` fits on every manual (threshold from the pooled held-out scores) and writes
assets/short_answer.json and assets/SHORT_ANSWER_CARD.md.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from bench.probe_set import load_manuals, load_questions
from engine.answer.evaluation import holds, normal
from engine.answer.passages import short_answer as sa
from engine.answer.passages.quote import Quote

NAME_KINDS = ("command", "which-option", "file", "syntax")  # the probe's name questions


def right(q, c: sa.Term) -> bool:
    """The term answers: it holds the key, or its line does with the term inside the key's match
    ("systemctl" in "systemctl daemon-reload", LEFTPADDING in "LEFTPADDING - ... defaults to 6")."""
    if holds(q, c.term):
        return True
    line = normal(c.line)
    at = line.find(normal(c.term))
    return at >= 0 and any(m.start() <= at < m.end() or at <= m.start() < at + len(c.term)
                           for m in q.pattern.finditer(line))


def candidates(rows: list[dict]) -> list[dict]:
    """Per question: its candidates' features and labels (right: the term holds the key)."""
    from engine.answer.question import Question
    from engine.routing.dense import load_encoder

    encoder = load_encoder("cpu")
    qs = {q.id: q for q in load_questions(manuals=load_manuals())}
    out = []
    for r in rows:
        q = qs[r["id"]]
        passages = [Quote(text=p["text"], doc_id=1, node_id=0, heading=p.get("heading", ""),
                          page=p["page"],
                          score=0.0, rid=0, channel="") for p in r.get("passages") or []]
        cands = sa.terms(passages) if not sa.WHY.match(q.question) else []
        out.append({"id": q.id, "manual": q.manual, "kind": q.kind, "question": q.question,
                    "terms": [c.term for c in cands], "lines": [c.line for c in cands],
                    "x": sa.features(Question.read(q.question), cands, passages, encoder),
                    "y": np.array([right(q, c) for c in cands], dtype=bool),
                    "line_right": [holds(q, f"{c.term} {c.line}") for c in cands]})
    return out


def fit(qs: list[dict]) -> sa.TermScorer:
    from sklearn.linear_model import LogisticRegression

    x = np.vstack([q["x"] for q in qs if len(q["x"])])
    y = np.concatenate([q["y"] for q in qs if len(q["x"])])
    mean, scale = x.mean(0), x.std(0)
    scale[scale == 0] = 1.0
    lr = LogisticRegression(C=1.0, max_iter=2000).fit((x - mean) / scale, y)
    return sa.TermScorer(sa.FEATURES, mean, scale, lr.coef_[0], float(lr.intercept_[0]), 0.0)


def best(scorer: sa.TermScorer, q: dict) -> tuple[float, int] | None:
    if not len(q["x"]):
        return None
    p = scorer.probabilities(q["x"])
    i = int(np.argmax(p))
    return float(p[i]), i


def threshold_for(picks: list[tuple[float, bool]], precision: float) -> float:
    """The lowest score whose picks at or above it are right at least ``precision`` of the time
    (1.0, nothing given, when none is)."""
    for t in sorted({s for s, _ in picks}):
        given = [ok for s, ok in picks if s >= t]
        if given and sum(given) / len(given) >= precision:
            return t
    return 1.0


def held_out_picks(qs: list[dict], precision: float) -> list[dict]:
    """Each question answered by a model fitted without its manual (threshold: inner folds)."""
    manuals = sorted({q["manual"] for q in qs})
    out = []
    for m in manuals:
        train = [q for q in qs if q["manual"] != m]
        inner = []
        for m2 in sorted({q["manual"] for q in train}):
            s2 = fit([q for q in train if q["manual"] != m2])
            for q in (q for q in train if q["manual"] == m2):
                b = best(s2, q)
                if b is not None:
                    inner.append((b[0], bool(q["y"][b[1]])))
        scorer, t = fit(train), threshold_for(inner, precision)
        for q in (q for q in qs if q["manual"] == m):
            b = best(scorer, q)
            score, i = b if b is not None else (0.0, -1)
            out.append({"id": q["id"], "manual": m, "kind": q["kind"], "score": score,
                        "threshold": t, "given": b is not None and score >= t,
                        "term": q["terms"][i] if i >= 0 else None,
                        "right": bool(i >= 0 and q["y"][i]),
                        "line_right": bool(i >= 0 and q["line_right"][i]),
                        "any_right": bool(q["y"].any()) if len(q["y"]) else False})
    return out


def summary(picks: list[dict]) -> str:
    groups = defaultdict(list)
    for p in picks:
        groups["all"].append(p)
        groups["name questions" if p["kind"] in NAME_KINDS else "other questions"].append(p)
        groups[p["manual"]].append(p)
    lines = ["| group | questions | a right term among the candidates | given | right when given "
             "| holds the key with its line |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for g, ps in groups.items():
        n, given = len(ps), [p for p in ps if p["given"]]
        right = sum(p["right"] for p in given)
        line = sum(p["line_right"] for p in given)
        lines.append(f"| {g} | {n} | {sum(p['any_right'] for p in ps)} | {len(given)} | "
                     f"{right}/{len(given)} ({100 * right / max(1, len(given)):.0f}%) | "
                     f"{line}/{len(given)} |")
    return "\n".join(lines)


CARD = """# The short answer's term scorer

`assets/short_answer.json`: a logistic regression over `engine.answer.passages.short_answer.FEATURES`
(standardised), fitted by `python -m bench.short_answer_fit --rows {rows} --precision {precision}
--write` on the dev probe's passages ({n_q} questions over {n_m} manuals, {n_c} candidate terms,
{n_pos} of them right), the passages from `python -m bench.probe_stage --linear-only` (the
shipped quote stage, units version {units}).

Threshold {threshold:.4f}: the lowest score at which the pooled held-out picks (each manual
answered by a model fitted without it) are right at least {precision:.0%} of the time.

Held-out figures (each manual's questions answered by a model fitted on the other manuals,
its threshold chosen by an inner leave-one-manual-out on them):

{table}

Refit after a change to the passages (units, quote, `terms`, `FEATURES`): loading a file fitted
on other features fails.
"""


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.short_answer_fit")
    ap.add_argument("--rows", type=Path, required=True, help="bench.probe_stage's rows.jsonl")
    ap.add_argument("--precision", type=float, default=0.75)
    ap.add_argument("--write", action="store_true", help="write the asset and its card")
    ap.add_argument("--out", type=Path, default=None, help="write the held-out picks (JSON Lines)")
    a = ap.parse_args(argv)
    rows = [json.loads(ln) for ln in a.rows.read_text().splitlines() if ln.strip()]
    rows = [r for r in rows if r["variant"].startswith("before")]
    qs = candidates(rows)
    picks = held_out_picks(qs, a.precision)
    table = summary(picks)
    print(table)
    if a.out:
        a.out.write_text("".join(json.dumps(p) + "\n" for p in picks))
    if a.write:
        from engine.answer.passages.unit_vectors import UNITS_VERSION

        scorer = fit(qs)
        pooled = [(p["score"], p["right"]) for p in picks if p["term"] is not None]
        threshold = threshold_for(pooled, a.precision)
        sa.ASSET.write_text(json.dumps({
            "features": list(sa.FEATURES), "mean": scorer.mean.round(6).tolist(),
            "scale": scorer.scale.round(6).tolist(), "coef": scorer.coef.round(6).tolist(),
            "intercept": round(scorer.intercept, 6), "threshold": round(threshold, 4),
            "units_version": UNITS_VERSION, "precision": a.precision}, indent=1) + "\n")
        n_c = sum(len(q["y"]) for q in qs)
        n_pos = int(sum(q["y"].sum() for q in qs))
        (sa.ASSET.parent / "SHORT_ANSWER_CARD.md").write_text(CARD.format(
            rows=a.rows, precision=a.precision, n_q=len(qs), n_m=len({q["manual"] for q in qs}),
            n_c=n_c, n_pos=n_pos, units=UNITS_VERSION, threshold=threshold, table=table))
        print(f"wrote {sa.ASSET} (threshold {threshold:.4f})")


if __name__ == "__main__":
    main()
