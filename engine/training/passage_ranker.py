"""Fit the passage ranker (``engine.answer.passages.ranking``) on Debian documentation manuals.

    python -m engine.training.passage_ranker build [--data data/ranker] [--limit N]
    python -m engine.training.passage_ranker fit [--data data/ranker] [--out assets/passage_ranker.json]

``build`` fetches ``PACKAGES`` (``apt-get download`` + ``dpkg-deb -x``, as the training data step
does), refuses any file that is evaluation data (``data.check_not_evaluation``), builds each
manual of ``MANUALS`` into a tree and writes its pairs (``passage_pairs.manual_rows``) to
``<data>/pairs/<name>-<sha12>.npz`` (made once per manual: a rerun adds only new manuals).
``fit`` splits the manuals (not the pairs) into training and held-out ones (every
``HELD_OUT_EVERY``-th manual by name), fits a logistic regression (scikit-learn, balanced
classes) and, to compare, a gradient-boosted tree model on the training manuals, and reports
top-1 hit (the best-scored candidate is a positive) on both sides and for today's linear score;
it writes the logistic model as JSON (the shipped one: small, no pickle).

The reserved evaluation packages (texlive-latex-recommended-doc, git-doc), the evaluation corpus
manuals, the dev manuals and the dev probe's manuals are never in ``MANUALS``.
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np

from engine.answer.passages.ranking import FEATURES

PACKAGES = ["texlive-science-doc", "bash-doc", "developers-reference"]
_TL = "usr/share/doc/texlive-doc/latex/"
MANUALS = [_TL + p for p in (
    "chemgreek/chemgreek_en.pdf", "messagepassing/messagepassing.pdf", "lplfitch/lplfitch.pdf",
    "chemexec/chemexec_en.pdf", "chemstyle/chemstyle.pdf", "chemschemex/chemschemex.pdf",
    "delimset/delimset.pdf", "revquantum/revquantum.pdf", "functan/functan.pdf",
    "mathfixs/mathfixs.pdf", "easing/easing.pdf", "chemsec/chemsec.pdf", "mismath/mismath.pdf",
    "complexity/complexity.pdf", "algorithms/algorithms.pdf", "cvss/cvss.pdf",
    "autobreak/autobreak.pdf", "causets/causets.pdf", "pm-isomath/pm-isomath.pdf",
    "karnaugh/kvdoc.pdf", "engtlc/engtlc.pdf", "algxpar/algxpar.pdf",
    "mathcommand/mathcommand.pdf", "euclideangeometry/euclideangeometry.pdf",
    "ebproof/ebproof.pdf", "ulqda/ulqda.pdf", "ytableau/ytableau.pdf", "chemnum/chemnum_en.pdf",
    "algorithmicx/algorithmicx.pdf", "eolang/eolang.pdf", "ionumbers/ionumbers.pdf",
    "apxproof/apxproof.pdf", "ccool/ccool.pdf", "siunits/SIunits.pdf", "prftree/prftreedoc.pdf",
    "derivative/derivative.pdf", "unitsdef/unitsdef.pdf", "matlab-prettifier/matlab-prettifier.pdf",
    "chemformula/chemformula-manual.pdf", "thermodynamics/thermodynamics.pdf",
    "diffcoeff/diffcoeff4.pdf", "struktex/struktex.en.pdf", "overarrows/overarrows.pdf",
    "zx-calculus/zx-calculus.pdf", "statistics/statistics.pdf", "bytefield/bytefield.pdf",
    "algorithm2e/algorithm2e.pdf", "nchairx/nchairx.pdf", "sankey/sankey.pdf",
    "chemplants/chemplants-doc.pdf", "chemmacros/chemmacros-manual.pdf",
    "siunitx/siunitx.pdf", "physconst/physconst.pdf", "nicematrix/nicematrix.pdf")] + [
    "usr/share/doc/texlive-doc/generic/witharrows/witharrows.pdf",
    "usr/share/doc/bash-doc/bash.pdf",
    "usr/share/doc/developers-reference/docs/developers-reference.pdf"]
HELD_OUT_EVERY = 4


class CachedEncoder:
    """The sentence encoder with each text encoded once per manual (its candidates overlap)."""

    def __init__(self, encoder):
        self.encoder, self.seen = encoder, {}

    def encode(self, texts):
        new = [t for t in dict.fromkeys(texts) if t not in self.seen]
        if new:
            self.seen.update(zip(new, self.encoder.encode(new)))
        return np.stack([self.seen[t] for t in texts])

    def encode_query(self, text):
        return self.encoder.encode_query(text)


def build(data: Path, limit: int | None, shared: Path) -> None:
    from tqdm import tqdm

    from engine.document.build import build_tree
    from engine.memory.backbone import load_tokenizer
    from engine.routing.dense import load_encoder
    from engine.settings import Settings
    from engine.training.data import check_not_evaluation, fetch_packages, sha256_file
    from engine.training.passage_pairs import manual_rows

    fetch_packages(PACKAGES, data)
    order = MANUALS[-6:][::-1] + [m for pair in zip(MANUALS[:-6][::2], MANUALS[:-6][1::2][::-1])
                                  for m in pair]
    order += [m for m in MANUALS if m not in order]
    paths = [data / "root" / m for m in order[:limit]]
    check_not_evaluation(paths, shared)
    settings = Settings()
    tok = load_tokenizer(settings)
    encoder = load_encoder("cpu")
    out = data / "pairs"
    out.mkdir(parents=True, exist_ok=True)
    for p in tqdm(paths, desc="manuals"):
        sha = sha256_file(p)
        dest = out / f"{p.stem}-{sha[:12]}.npz"
        if dest.exists():
            continue
        tree = build_tree(p, lambda t: tok.encode(t, add_special_tokens=False), tok.decode,
                          settings.node_token_limit)
        rows, labels, groups, queries = manual_rows(CachedEncoder(encoder), tree, f"42:{sha}")
        np.savez_compressed(dest, rows=rows, labels=labels, groups=groups,
                            kinds=np.asarray([q.kind for q in queries]),
                            questions=np.asarray([q.question for q in queries]))


def load_pairs(data: Path) -> dict[str, dict]:
    out = {}
    for f in sorted((data / "pairs").glob("*.npz")):
        z = np.load(f)
        if z["rows"].shape[1] != len(FEATURES):
            continue
        out[f.stem] = {k: z[k] for k in z.files}
    return out


def top1(scores: np.ndarray, labels: np.ndarray, groups: np.ndarray, n_queries: int) -> float:
    """Share of the queries whose best-scored candidate is a positive (no candidate: a miss)."""
    hits = 0
    for g in np.unique(groups):
        m = groups == g
        hits += bool(labels[m][int(np.argmax(scores[m]))])
    return hits / max(1, n_queries)


def linear_today(rows: np.ndarray) -> np.ndarray:
    """Today's quote score (engine.answer.passages.sentences.score) from the same feature rows."""
    f = {n: rows[:, i] for i, n in enumerate(FEATURES)}
    return f["cosine"] + 0.5 * f["pool_bm25"] + 0.2 * f["heading_match"] + 0.1 * f["type_fit"]


def fit(data: Path, out: Path) -> dict:
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    pairs = load_pairs(data)
    names = sorted(pairs)
    held = set(names[::HELD_OUT_EVERY])

    def stack(keys):
        rows, labels, groups, nq, off = [], [], [], 0, 0
        for k in keys:
            z = pairs[k]
            rows.append(z["rows"]), labels.append(z["labels"]), groups.append(z["groups"] + off)
            nq += len(z["questions"])
            off += len(z["questions"])
        return np.concatenate(rows), np.concatenate(labels), np.concatenate(groups), nq

    tr = stack([k for k in names if k not in held])
    te = stack([k for k in names if k in held])
    scaler = StandardScaler().fit(tr[0])
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    lr = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000)
    lr.fit((tr[0] - scaler.mean_) / scale, tr[1])
    gb = HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_leaf_nodes=15,
                                        class_weight="balanced", random_state=0).fit(tr[0], tr[1])
    report = {"manuals": {"train": len(names) - len(held), "held_out": len(held)},
              "queries": {"train": tr[3], "held_out": te[3]},
              "pairs": {"train": int(len(tr[1])), "held_out": int(len(te[1]))}}
    for label, (rows, labels, groups, nq) in (("train", tr), ("held_out", te)):
        report[f"top1_{label}"] = {
            "today's linear score": round(100 * top1(linear_today(rows), labels, groups, nq), 1),
            "logistic regression": round(100 * top1(
                lr.decision_function((rows - scaler.mean_) / scale), labels, groups, nq), 1),
            "gradient boosting": round(100 * top1(gb.predict_proba(rows)[:, 1], labels, groups,
                                                  nq), 1)}
    # the quote's bar: the decision boundary (a passage more likely right than not). The
    # training questions' best candidates all pass it (their least best probability is in the
    # report); a user's question is harder, so no quantile of theirs is used
    probs = lr.predict_proba((te[0] - scaler.mean_) / scale)[:, 1]
    best = [probs[te[2] == g].max() for g in np.unique(te[2])]
    report["least best probability, held out"] = round(float(min(best)), 3) if best else None
    threshold = 0.5
    model = {"features": list(FEATURES), "mean": scaler.mean_.round(6).tolist(),
             "scale": scale.round(6).tolist(), "coef": lr.coef_[0].round(6).tolist(),
             "intercept": round(float(lr.intercept_[0]), 6), "threshold": round(threshold, 4),
             "report": report}
    out.write_text(json.dumps(model, indent=1) + "\n")
    return report


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m engine.training.passage_ranker")
    ap.add_argument("step", choices=("build", "fit"))
    ap.add_argument("--data", type=Path, default=Path("data/ranker"))
    ap.add_argument("--shared", type=Path, default=Path("../shared"))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", type=Path, default=Path("assets/passage_ranker.json"))
    a = ap.parse_args(argv)
    random.seed(0)
    if a.step == "build":
        build(a.data, a.limit, a.shared)
    else:
        print(json.dumps(fit(a.data, a.out), indent=1))


if __name__ == "__main__":
    main()
