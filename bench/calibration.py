"""The answer check's confidence: labelled answers, the fit, and its risk-coverage curve.

    python -m bench.calibration answer --questions data/calib/questions.jsonl \\
        --rows data/calib/rows.jsonl [--limit N] [--db-dir DIR]
    python -m bench.calibration fit --rows data/calib/rows.jsonl --dev PROBE_ROWS.jsonl \\
        [--out assets/answer_check.json]
    python -m bench.calibration report --rows ROWS.jsonl [--model assets/answer_check.json]

``answer`` asks every question in text mode (each manual ingested once, text only, into a
library under --db-dir) and appends one row per answer to --rows: the answer, the quote, the key
line, the answer check's signals (``engine.answer.checks.confidence``), and ``right``: the question's
key-fact regex found in the answer (``key_hit``: in the key line; ``quote_hit``: in the quote).
Rows already there are kept (the run resumes). Question files: one JSON object a line with
``question``, ``regex``, ``doc`` (the manual's path) and ``manual`` (its name), as made by
``bench.calibration_questions`` and by the dev probe (bench/probe/questions.jsonl).

``fit`` fits the logistic regression (scikit-learn, signals standardised) on --rows, reports
the AUROC on each manual with the model fitted on the others (``by_manual``), fits on all rows
(each row twice: once as it is, once with the reader's log-probabilities missing, as a served
reader gives them, ``confidence.LOGPROB_DEFAULT``), chooses the fold threshold on --dev (the
highest that folds at most ``MAX_RIGHT_FOLDED`` of its right answers) and writes the model.

--rows and --dev read this bench's rows or the dev probe's (bench/probe.py's OUT/rows.jsonl: the
``calibration`` field of its text-mode rows). ``report`` prints, for rows scored by the model: the AUROC, the risk-coverage curve (share of
the shown answers that are wrong against the share of the right answers shown, one line per
threshold), and at the model's threshold the two figures of the issue: wrong answers shown
unfolded as a share of all answers, right answers folded as a share of the right ones; and the
key line's hit on the questions that got one.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
import json
import re
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from bench.calibration_questions import informative
from engine.answer.checks.confidence import LOGPROB_DEFAULT, SIGNALS, Confidence, reader_of
from engine.answer.passages.scorer_version import passage_scorer
from engine.settings import Settings

MAX_RIGHT_FOLDED = 0.25  # the bound on right answers folded, on the dev probe
C_GRID = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)  # logistic regression's inverse regularisation
ASSET = Path("assets/answer_check.json")


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# -- answering -----------------------------------------------------------------------------------

def answer_rows(questions: list[dict], rows_path: Path, db_dir: Path, mode: str = "text") -> None:
    """Ask each question not yet in ``rows_path`` and append its row (module docstring);
    ``mode`` "quote": the quote alone, no generation (its rows' ``quote_hit`` is the quote's
    hit on manuals the quote's design never read), then the hit per manual."""
    from engine.ask import AskOptions, ask
    from engine.ingest import ingest_file
    from engine.runtime import Runtime

    done = {(r["manual"], r["question"]) for r in read_rows(rows_path)}
    todo = [q for q in questions if (q["manual"], q["question"]) not in done]
    print(f"{len(done)} rows there, {len(todo)} to answer", flush=True)
    if not todo:
        return
    db_dir.mkdir(parents=True, exist_ok=True)
    rt = Runtime.load(Settings(data_dir=db_dir))
    ids: dict[str, int] = {}
    rows_path.parent.mkdir(parents=True, exist_ok=True)
    with open(rows_path, "a") as out:
        for i, q in enumerate(todo):
            if q["doc"] not in ids:
                ids[q["doc"]] = ingest_file(Path(q["doc"]), rt, memories=False).doc_id
            a = ask(rt, ids[q["doc"]], q["question"], AskOptions(mode=mode), log=False)
            out.write(json.dumps(labelled_row(q, a)) + "\n")
            out.flush()
            print(f"[{i + 1}/{len(todo)}] {q['manual']}: right={labelled_row(q, a)['right']} "
                  f"{q['question'][:70]}", flush=True)
    rows = read_rows(rows_path)
    for m in sorted({r["manual"] for r in rows}):
        hits = [r["quote_hit"] for r in rows if r["manual"] == m]
        print(f"{m}: the quote holds the key fact for {sum(hits)}/{len(hits)}")
    print(f"all: {sum(r['quote_hit'] for r in rows)}/{len(rows)}")


def interleaved(questions: list[dict]) -> list[dict]:
    """The questions taken round-robin over their manuals (a partial run covers them all)."""
    by: dict[str, list[dict]] = {}
    for q in questions:
        by.setdefault(q["manual"], []).append(q)
    out, lists = [], list(by.values())
    for i in range(max(map(len, lists), default=0)):
        out += [qs[i] for qs in lists if i < len(qs)]
    return out


def labelled_row(q: dict, a) -> dict:
    """One answer to a question of ``bench.calibration_questions`` as a row."""
    rx = re.compile(q["regex"])
    return {"manual": q["manual"], "question": q["question"], "kind": q.get("kind"),
            "regex": q["regex"], **calibration_fields(a, lambda t: rx.search(t) is not None)}


def calibration_fields(a, holds) -> dict:
    """What an answer said, what the answer check read, and the key-fact labels (``holds(text)``:
    the question's regex finds the fact in ``text``): the fields ``fit`` and ``report`` read,
    shared by this bench's rows and the dev probe's (bench/probe.py)."""
    found = lambda text: bool(text) and bool(holds(text))  # noqa: E731
    j = a.as_json()
    key = j["key_line"]
    return {"answer": a.text, "right": found(a.text),
            "quote": a.quote.text if a.quote is not None else None,
            "quote_hit": found(a.quote.text if a.quote is not None else ""),
            "key_line": key, "key_hit": found(key["text"]) if key else None,
            "confidence": j["confidence"], "check": j["check"], "stop": a.stop,
            "folded": a.folded, "fold_line": a.fold_line, "logprobs": a.logprobs,
            # what folds an answer whatever its confidence (its form, a degenerate output)
            "form": j["form"], "degenerate": j["degenerate"],
            "sources": list(a.sources)}


# -- fitting -------------------------------------------------------------------------------------

def matrix(rows: list[dict], logprobs: bool = True,
           names: tuple[str, ...] = SIGNALS) -> tuple[np.ndarray, np.ndarray]:
    """(signals [n, len(names)], labels [n]); ``logprobs=False``: as if the reader gave none."""
    x = []
    for r in rows:
        s = dict(r["confidence"]["signals"])
        if not logprobs:
            s.update(lp_mean=LOGPROB_DEFAULT[0], lp_min=LOGPROB_DEFAULT[1], lp_known=0.0)
        x.append([s[n] for n in names])
    return np.array(x, dtype=float), np.array([bool(r["right"]) for r in rows])


def fit(rows: list[dict], c: float = 0.5, names: tuple[str, ...] = SIGNALS
        ) -> tuple[np.ndarray, np.ndarray, LogisticRegression]:
    """(mean, scale, model) fitted on ``rows`` (their signals ``names``) and on their copies
    without log-probabilities."""
    xa, y = matrix(rows, names=names)
    xb, _ = matrix(rows, logprobs=False, names=names)
    x, y = np.vstack([xa, xb]), np.concatenate([y, y])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=c, class_weight="balanced", max_iter=2000)
    model.fit((x - mean) / scale, y)
    return mean, scale, model


def as_confidence(mean, scale, model, threshold: float = 0.5,
                  names: tuple[str, ...] = SIGNALS) -> Confidence:
    return Confidence(tuple(names), mean, scale, model.coef_[0], float(model.intercept_[0]),
                      threshold)


def scores(conf: Confidence, rows: list[dict], logprobs: bool = True) -> np.ndarray:
    x, _ = matrix(rows, logprobs, conf.names)
    return np.array([conf.score(dict(zip(conf.names, v))) for v in x])


def auroc(y: np.ndarray, s: np.ndarray) -> float | None:
    return float(roc_auc_score(y, s)) if 0 < y.sum() < len(y) else None


def by_manual(rows: list[dict], c: float = 0.5,
              names: tuple[str, ...] = SIGNALS) -> dict[str, dict]:
    """Per manual: the AUROC of the model fitted (at ``c``) on the other manuals' rows (and
    without log-probabilities), with the manual's row count and right answers."""
    out = {}
    for m in sorted({r["manual"] for r in rows}):
        train = [r for r in rows if r["manual"] != m]
        test = [r for r in rows if r["manual"] == m]
        conf = as_confidence(*fit(train, c, names), names=names)
        _, y = matrix(test, names=names)
        out[m] = {"rows": len(test), "right": int(y.sum()), "auroc": auroc(y, scores(conf, test)),
                  "auroc_no_logprobs": auroc(y, scores(conf, test, logprobs=False))}
    return out


def mean_auroc(folds: dict[str, dict]) -> float:
    """The mean of the held-out manuals' AUROCs (those that have both labels)."""
    got = [f["auroc"] for f in folds.values() if f["auroc"] is not None]
    return float(np.mean(got)) if got else 0.0


def choose_c(rows: list[dict], names: tuple[str, ...] = SIGNALS) -> tuple[float, dict[str, dict]]:
    """The regularisation (``C_GRID``) whose model, fitted on all manuals but one, ranks the
    held-out manual's answers best on average (leave one manual out), with its folds: a few
    dozen right answers and 17 signals overfit at sklearn's default."""
    tried = {c: by_manual(rows, c, names) for c in C_GRID}
    best = max(C_GRID, key=lambda c: mean_auroc(tried[c]))
    return best, tried[best]


def threshold_on(conf: Confidence, dev: list[dict]) -> float:
    """The highest threshold that folds at most ``MAX_RIGHT_FOLDED`` of ``dev``'s right answers."""
    s = scores(conf, dev)
    _, y = matrix(dev)
    right = np.sort(s[y])
    if not len(right):
        return 0.5
    k = int(np.floor(MAX_RIGHT_FOLDED * len(right)))  # right answers below may be folded
    return float(right[k]) if k < len(right) else float(right[-1])


# -- reporting -----------------------------------------------------------------------------------

def curve(y: np.ndarray, s: np.ndarray, points: int = 11) -> list[tuple[float, float, float]]:
    """(threshold, coverage: share of right answers shown, risk: share of shown that are
    wrong) at thresholds spread over the scores' quantiles."""
    out = []
    for t in np.unique(np.quantile(s, np.linspace(0, 1, points))):
        shown = s >= t
        cov = (shown & y).sum() / max(1, y.sum())
        risk = (shown & ~y).sum() / max(1, shown.sum())
        out.append((float(t), float(cov), float(risk)))
    return out


def figures(y: np.ndarray, s: np.ndarray, threshold: float) -> dict:
    shown = s >= threshold
    return {"answers": int(len(y)), "right": int(y.sum()),
            "wrong_shown_of_all": float((shown & ~y).sum() / max(1, len(y))),
            "right_folded_of_right": float((~shown & y).sum() / max(1, y.sum())),
            "auroc": auroc(y, s)}


def report(rows: list[dict], conf: Confidence, title: str) -> dict:
    """Prints the AUROC, the risk-coverage curve and the issue's figures; returns the figures."""
    s = scores(conf, rows)
    _, y = matrix(rows)
    fig = figures(y, s, conf.threshold)
    keyed = [r for r in rows if r.get("key_line")]
    fig["key_line_questions"] = len(keyed)
    fig["key_line_hit"] = (sum(bool(r["key_hit"]) for r in keyed) / len(keyed)) if keyed else None
    fig["quote_hit"] = sum(bool(r["quote_hit"]) for r in rows) / max(1, len(rows))
    au = "n/a" if fig["auroc"] is None else f"{fig['auroc']:.3f}"
    print(f"\n{title}: {fig['answers']} answers, {fig['right']} right; AUROC {au}")
    print("threshold  right shown  wrong among shown")
    for t, cov, risk in curve(y, s):
        print(f"  {t:7.3f}      {cov:6.1%}          {risk:6.1%}")
    print(f"at the threshold {conf.threshold:.3f}: wrong answers shown unfolded "
          f"{fig['wrong_shown_of_all']:.1%} of all answers; right answers folded "
          f"{fig['right_folded_of_right']:.1%} of the right ones")
    if keyed:
        print(f"key line holds the key fact: {fig['key_line_hit']:.1%} of {len(keyed)} questions "
              "with a key line")
    return fig


def signal_report(rows: list[dict], title: str) -> dict:
    """Without a fitted model: the AUROC of each signal alone (oriented as it separates best,
    a descriptive figure, nothing fitted), the rule-based check's folds (``folded``) as a
    threshold, and the key line's hit."""
    x, y = matrix(rows)
    folded = np.array([bool(r["folded"]) for r in rows])
    fig = figures(y, (~folded).astype(float), 0.5)
    keyed = [r for r in rows if r.get("key_line")]
    fig["key_line_questions"] = len(keyed)
    fig["key_line_hit"] = (sum(bool(r["key_hit"]) for r in keyed) / len(keyed)) if keyed else None
    print(f"\n{title}: {len(y)} answers, {int(y.sum())} right (no fitted model)")
    print(f"the rule-based check: wrong answers shown unfolded {fig['wrong_shown_of_all']:.1%} "
          f"of all answers; right answers folded {fig['right_folded_of_right']:.1%} of the "
          "right ones")
    if keyed:
        print(f"key line holds the key fact: {fig['key_line_hit']:.1%} of {len(keyed)} "
              "questions with a key line")
    fig["signal_auroc"] = {}
    for i, name in enumerate(SIGNALS):
        a = auroc(y, x[:, i])
        if a is not None:
            fig["signal_auroc"][name] = max(a, 1 - a)
            print(f"  {name:16s} AUROC {max(a, 1 - a):.3f} ({'higher' if a >= 0.5 else 'lower'}"
                  " when right)")
    return fig


def probe_rows(rows: list[dict]) -> list[dict]:
    """The dev probe's generated answers as this bench's rows (bench/probe.py's ``calibration``
    field, with the row's manual, question and kind)."""
    return [{"manual": r["manual"], "question": r["question"], "kind": r["kind"],
             **r["calibration"]} for r in rows if r.get("calibration")]


def report_probe(rows: list[dict], model: Path = ASSET) -> dict | None:
    """``report`` on the dev probe's rows (None when no row generated or no model is there)."""
    conf, scored = Confidence.load(model), probe_rows(rows)
    if conf is None or not scored:
        return None
    return report(scored, conf, "the answer check on the dev probe")


def read_any(path: Path) -> list[dict]:
    """Rows of this bench, or the dev probe's rows (OUT/rows.jsonl of bench/probe.py)."""
    rows = read_rows(path)
    return probe_rows(rows) if rows and "calibration" in rows[0] else rows


def write_model(conf: Confidence, path: Path, meta: dict) -> None:
    path.write_text(json.dumps({"signals": list(conf.names), "mean": conf.mean.round(6).tolist(),
                                "scale": conf.scale.round(6).tolist(),
                                "coef": conf.coef.round(6).tolist(),
                                "intercept": round(conf.intercept, 6),
                                "threshold": round(conf.threshold, 6), "reader": conf.reader,
                                **meta}, indent=1) + "\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=("answer", "fit", "report"))
    ap.add_argument("--questions", type=Path, nargs="*", default=[])
    ap.add_argument("--rows", type=Path, nargs="+", required=True)
    ap.add_argument("--dev", type=Path, nargs="*", default=[])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--mode", choices=("text", "quote"), default="text",
                    help="answer: text (the fit's rows) or quote (the quote's hit alone)")
    ap.add_argument("--db-dir", type=Path, default=Path("data/calib/library"))
    ap.add_argument("--out", type=Path, default=ASSET)
    ap.add_argument("--model", type=Path, default=ASSET)
    args = ap.parse_args(argv)
    if args.step == "answer":
        qs = interleaved([json.loads(ln) for p in args.questions for ln in open(p) if ln.strip()])
        answer_rows(qs[:args.limit], args.rows[0], args.db_dir, args.mode)
        return
    rows = [r for p in args.rows for r in read_any(p)]
    dropped = [r for r in rows if not informative(r)]
    rows = [r for r in rows if informative(r)]
    print(f"{len(rows)} rows ({len(dropped)} left out: the question holds its own key fact)")
    if args.step == "report":
        conf = Confidence.load(args.model)
        if conf is None:  # no fitted model: each signal alone, the key line, the rule check
            signal_report(rows, ", ".join(str(p) for p in args.rows))
        else:
            report(rows, conf, ", ".join(str(p) for p in args.rows))
        return
    c, folds = choose_c(rows)
    for m, f in folds.items():
        print(f"{m}: {f}")
    print(f"C = {c} (mean held-out AUROC {mean_auroc(folds):.3f})")
    # the reader that answered the rows
    conf = replace(as_confidence(*fit(rows, c)), reader=reader_of(Settings.from_env()))
    dev = [r for p in args.dev for r in read_any(p)]
    # the choice is the dev probe; without its rows, the fitted rows (said in the file)
    conf = replace(conf, threshold=threshold_on(conf, dev or rows))
    write_model(conf, args.out, {"passages": passage_scorer(),
                                 "fitted_on": sorted({r["manual"] for r in rows}),
                                 "rows": len(rows), "C": c, "by_manual": folds,
                                 "threshold_on": "dev probe" if dev else "fitted rows"})
    print(f"model -> {args.out} (threshold {conf.threshold:.3f})")
    if dev:
        report(dev, conf, "dev probe")


if __name__ == "__main__":
    main()
