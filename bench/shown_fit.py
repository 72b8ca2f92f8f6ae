"""What the screen shows as fact, fitted and measured on the dev probe, held out by manual
(issue 67): the answer check's confidence and its fold threshold, and the key line's rule.

    python -m bench.shown_fit --rows out/probe-text/rows.jsonl [--write assets/answer_check.json]

Reads the dev probe's text-mode rows (``python -m bench.probe --modes text``; each carries the
signals the engine computed, ``engine.answer.checks.confidence.SIGNALS``). On the screen, per
question: the three passages (always shown, as the manual's text), the key line (when its rule
says so, ``KEY_RULES``) and the model's answer, folded when its form, the rule check or a
degenerate output says so whatever its score, or when its confidence is under the threshold.
Two figures (issue 67's targets, ``TARGETS``):

- wrong shown unmarked: questions where the screen shows, unfolded, an answer without the key
  fact, or a key line without it, out of all questions;
- right folded: right answers (the key's regex in the answer) folded, out of the right answers.

Every score is held out by manual: each manual's answers are scored by a model fitted on the
other manuals (its regularisation chosen by leave-one-manual-out among those,
``bench.calibration.choose_c``). The curve gives both figures at each threshold over these
scores; the threshold chosen (``choose_threshold``) is measured held out too: each manual's at
the threshold chosen on the other manuals' held-out scores. ``--write`` fits on every manual and
writes the model with the threshold chosen on all held-out scores.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.calibration import as_confidence, auroc, choose_c, fit, read_rows, scores, write_model
from engine.answer.checks.confidence import SIGNALS
from engine.answer.passages.scorer_version import passage_scorer

TARGETS = (0.05, 0.10)  # wrong shown unmarked (of all), right folded (of the right answers)
# The signals a fit reads (``--signals``): all, those before issue 67, and a few (chosen on the
# first 78 questions, docs/results.md: fewer signals rank held-out manuals better)
SIGNAL_SETS = {"all": SIGNALS, "before": SIGNALS[:17],
               "few": ("key_agree", "words", "lp_mean", "sim_mean", "type_miss", "quote_score",
                       "quote_lead", "entry_agree")}


def probe_answers(rows: list[dict], flag_folds: bool = False) -> list[dict]:
    """The dev probe's text-mode rows as the fit reads them: the row's manual and id, its
    signals, ``right``, ``ruled`` (folded whatever its score, or no generated answer), the key
    line's fields (``flag_folds``: the rule check's flag folds by itself, as before issue 67;
    else it is one of the confidence's signals only; ``key``: shown as a whole term of the quote where the manual has one clear
    place, ``engine.answer.shown``; ``key_hit``; ``key_agree``: the answer names it)."""
    out = []
    for r in rows:
        if r.get("mode") != "text":
            continue
        cal = r.get("calibration") or {}
        sig = ((cal.get("confidence") or {}).get("signals")) or {}
        form = cal.get("form") or {}
        flagged = bool((cal.get("check") or {}).get("flagged"))
        ruled = (not sig or r.get("not_covered") or bool(cal.get("degenerate"))
                 or bool(form.get("fault")) or (flag_folds and flagged))
        out.append({"manual": r["manual"], "id": r["id"], "question": r["question"],
                    "confidence": {"signals": sig}, "right": bool(r["verdict"]["answer_holds"]),
                    "ruled": bool(ruled),
                    "key": bool(r.get("key_line_term", r.get("key_line_shown"))),
                    "key_hit": bool(r.get("key_line_holds")),
                    "key_agree": sig.get("key_agree") == 1.0,
                    "folded_before": bool(r.get("folded")) or bool(ruled) or flagged})
    return out


def before(rows: list[dict]) -> dict:
    """The two figures as the rows were answered (the shipped check's folds, the key line as a
    whole term of the quote where the manual has one clear place)."""
    return screen(rows, np.array([0.0 if r["folded_before"] else 1.0 for r in rows]), 0.5,
                  "term")


def _scored(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["confidence"]["signals"]]


# -- the key line's rules ------------------------------------------------------------------------

def _term(r: dict, shown: bool) -> bool:
    return r["key"]


def _term_answer(r: dict, shown: bool) -> bool:
    return r["key"] and shown and r["key_agree"]


def _term_shown(r: dict, shown: bool) -> bool:
    return r["key"] and shown


# name -> (rule(row, the answer shown unfolded) -> the key line shown, in words)
KEY_RULES = {
    "term": (_term, "a whole term of the quote's entry, one clear place (before)"),
    "term+shown": (_term_shown, "as before, and the model's answer shown (the check supports it)"),
    "term+answer": (_term_answer, "as before, the answer shown, and the answer names its term"),
    "none": (lambda r, shown: False, "no key line"),
}


def screen(rows: list[dict], s: np.ndarray, threshold: float, rule: str) -> dict:
    """The two figures (module docstring) with the answers' held-out scores ``s`` folded under
    ``threshold`` and the key line's ``rule`` (``KEY_RULES``)."""
    keyed = KEY_RULES[rule][0]
    wrong = right_folded = n_right = keys = keys_wrong = shown_n = 0
    for r, x in zip(rows, s):
        shown = not r["ruled"] and x >= threshold
        key = keyed(r, shown)
        bad = (shown and not r["right"]) or (key and not r["key_hit"])
        wrong += bad
        n_right += r["right"]
        right_folded += r["right"] and not shown
        keys += key
        keys_wrong += key and not r["key_hit"]
        shown_n += shown
    return {"questions": len(rows), "wrong_unmarked": int(wrong), "right": int(n_right),
            "right_folded": int(right_folded), "answers_shown": int(shown_n),
            "key_lines": int(keys), "key_lines_wrong": int(keys_wrong),
            "wrong_share": wrong / max(1, len(rows)), "folded_share": right_folded / max(1, n_right)}


def choose_threshold(rows: list[dict], s: np.ndarray, rule: str) -> float:
    """The threshold a user would want (docs/results.md, issue 67): the lowest one whose wrong
    answers shown unmarked are at most ``TARGETS[0]`` (the fewest right answers folded for it);
    where none reaches it, the one with the fewest wrong shown, the lowest among equals."""
    grid = sorted({0.0, *np.round(s, 6).tolist(), 1.01})
    figs = [(t, screen(rows, s, t, rule)) for t in grid]
    ok = [t for t, f in figs if f["wrong_share"] <= TARGETS[0]]
    if ok:
        return min(ok)
    least = min(f["wrong_unmarked"] for _, f in figs)
    return min(t for t, f in figs if f["wrong_unmarked"] == least)


# -- held out by manual --------------------------------------------------------------------------

def held_out_scores(rows: list[dict], fixed_c: float | None = None,
                    names: tuple[str, ...] = SIGNALS) -> tuple[np.ndarray, dict]:
    """Each row's score by a model fitted on the other manuals' rows (their signals ``names``;
    C chosen among those by leave-one-manual-out, or ``fixed_c``), and each manual's C and
    AUROC."""
    s, info = np.zeros(len(rows)), {}
    for m in sorted({r["manual"] for r in rows}):
        train = _scored([r for r in rows if r["manual"] != m])
        c = fixed_c if fixed_c is not None else choose_c(train, names)[0]
        conf = as_confidence(*fit(train, c, names), names=names)
        idx = [i for i, r in enumerate(rows) if r["manual"] == m]
        test = [rows[i] for i in idx]
        got = np.array([conf.score(r["confidence"]["signals"]) if r["confidence"]["signals"]
                        else 0.0 for r in test])
        s[idx] = got
        y = np.array([r["right"] for r in test])
        info[m] = {"C": c, "rows": len(test), "right": int(y.sum()), "auroc": auroc(y, got)}
    return s, info


def nested_figures(rows: list[dict], s: np.ndarray, rule: str) -> tuple[dict, dict]:
    """The figures with each manual's threshold chosen on the other manuals' held-out scores
    (``s``) alone, and each manual's threshold."""
    shown_at = np.zeros(len(rows))
    chosen = {}
    for m in sorted({r["manual"] for r in rows}):
        rest = [i for i, r in enumerate(rows) if r["manual"] != m]
        t = choose_threshold([rows[i] for i in rest], s[rest], rule)
        chosen[m] = t
        for i, r in enumerate(rows):
            if r["manual"] == m:
                shown_at[i] = 1.0 if s[i] >= t else 0.0
    return screen(rows, shown_at, 0.5, rule), chosen


def curve_lines(rows: list[dict], s: np.ndarray, rule: str, points: int = 12) -> list[str]:
    """The trade-off: both figures at thresholds over the held-out scores' quantiles."""
    out = ["| threshold | answers shown | wrong shown unmarked | right folded | key lines "
           "(wrong) |", "| ---: | ---: | ---: | ---: | ---: |"]
    ts = sorted({0.0, *np.round(np.quantile(s, np.linspace(0, 1, points)), 3).tolist()})
    for t in ts:
        f = screen(rows, s, t, rule)
        out.append(f"| {t:.3f} | {f['answers_shown']} | {f['wrong_unmarked']}/{f['questions']}"
                   f" ({f['wrong_share']:.1%}) | {f['right_folded']}/{f['right']} "
                   f"({f['folded_share']:.1%}) | {f['key_lines']} ({f['key_lines_wrong']}) |")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=Path, nargs="+", required=True)
    ap.add_argument("--rule", default="term+answer", choices=sorted(KEY_RULES))
    ap.add_argument("--c", type=float, default=None, help="a fixed C (default: chosen by LOMO)")
    ap.add_argument("--write", type=Path, default=None, help="write the model fitted on all")
    ap.add_argument("--flag-folds", action="store_true",
                    help="the rule check's flag folds by itself (as before issue 67)")
    ap.add_argument("--signals", default="all", choices=sorted(SIGNAL_SETS))
    args = ap.parse_args(argv)
    rows = probe_answers([r for p in args.rows for r in read_rows(p)], args.flag_folds)
    print(f"as answered (the shipped check, the key line's rule before): {before(rows)}")
    missing = [n for n in SIGNALS if rows and rows[0]["confidence"]["signals"]
               and n not in rows[0]["confidence"]["signals"]]
    if missing:
        raise SystemExit(f"error: the rows lack the signals {missing}: ask them again")
    print(f"{len(rows)} questions, {sum(r['right'] for r in rows)} answers right, "
          f"{sum(r['ruled'] for r in rows)} folded by the rules or not generated "
          f"({sum(r['ruled'] and r['right'] for r in rows)} of them right), "
          f"{len({r['manual'] for r in rows})} manuals")
    names = SIGNAL_SETS[args.signals]
    s, info = held_out_scores(rows, args.c, names)
    y = np.array([r["right"] for r in rows])
    print(f"held-out AUROC (pooled) {auroc(y, s):.3f}; by manual:")
    for m, f in info.items():
        print(f"  {m}: {f}")
    for rule, (_, words) in KEY_RULES.items():
        print(f"\nkey line: {rule} ({words})")
        print("\n".join(curve_lines(rows, s, rule)))
        nested, chosen = nested_figures(rows, s, rule)
        t = choose_threshold(rows, s, rule)
        print(f"chosen on all held-out scores: {t:.3f} -> {screen(rows, s, t, rule)}")
        print(f"each manual at the threshold chosen on the others: {nested}")
    if args.write:
        c, folds = choose_c(_scored(rows), names)
        conf = as_confidence(*fit(_scored(rows), c, names), names=names)
        conf = replace(conf, threshold=choose_threshold(rows, s, args.rule))
        write_model(conf, args.write, {
            "passages": passage_scorer(), "fitted_on": sorted({r["manual"] for r in rows}),
            "rows": len(_scored(rows)), "C": c, "by_manual": info, "key_rule": args.rule,
            "threshold_on": "the dev probe's held-out scores (bench.shown_fit)"})
        print(f"model -> {args.write} (C {c}, threshold {conf.threshold:.3f})")


if __name__ == "__main__":
    main()
