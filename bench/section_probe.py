"""The right section first, then its unit, on the dev probe: a section-level choice against the
linear score's unit-level order, every weight held out by manual (issue 66, fifth session).

    python -m bench.section_probe collect [--db URL] [--manuals LIST] [--out DIR]
    python -m bench.section_probe rescore --rows FILE [--top 3] --out FILE
    python -m bench.section_probe report --rows FILE [FILE ...] [--ql-tops 3,8]

``collect`` reads each probe manual's tree from the probe library and stands in for the walk as
``bench.unit_probe`` does (the 50 best sections by BM25, ``bench.quote_time.ranked_sections``),
scores the routed units with the shipped linear score (``sentences.score``) and writes, per
question, **every routed section** as a whole: its rank and BM25 score in the stood-in walk, the
cosine of the question to the section's own evidence vector (the dense channel's, as the library
stores it for the router), the share of the question's words in its heading path and in its
heading path and text, its three best unit scores, whether its text holds the key; and its units
within reach of the bar (``REACH``) and its opening, each with its score's parts, where it sits
and the quote that would start at it (holds the key, begins on a gold page, a fragment).

``rescore`` reads each row's first ``--top`` distinct quotes in the linear order again with the
bundled SmolLM2 as a query-likelihood scorer (``rerank.QueryLikelihood``, the shipped chat
prompt), timing the pass.

``report`` replays the quote and the three passages (``bench.rerank_probe.replay``) for the
linear order and for section-level rules: the routed sections ordered by a section score (their
best unit's score, plus weighted section features: ``SECTION_FEATURES``), then the unit within
the chosen section (its best unit, or its opening when that scores within a margin of the best),
each weight chosen leave one manual out (the weights that give the other manuals' questions the
most quotes holding the key, ties to the smaller weights), by size band; a section score learned
on the other manuals (logistic regression over the same features, ``learned_orders``); the
likelihood's blend over the best 3 (and, with ``--ql-tops``, more) distinct passages, its weight
held out the same way; and the ceiling of any section-level choice (``oracle``: the right
section chosen by hand, then its best unit).
"""
from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np

from bench.rerank_probe import BANDS, band, replay

THRESHOLD = 0.70  # sentences.THRESHOLD (read here without importing the engine)
REACH = 0.45  # units scored at least this are recorded (bench.unit_probe)
RECORDED = 30  # candidates a replayed order keeps (bench.unit_probe)


# -- collect --------------------------------------------------------------------------------------

def collect(db: str, manuals: list[str] | None, n_sections: int, out: Path) -> None:
    import torch

    from bench.expand_probe import _Memo
    from bench.probe_set import holds, stored_manuals
    from engine.answer.passages import quote as quoting
    from engine.answer.passages import sentences, unit_prior
    from engine.answer.passages.answer_type import fits
    from engine.answer.question import Question
    from engine.routing import lexical
    from engine.routing.dense import for_evidence, load_encoder
    from engine.routing.evidence import evidence_fingerprint
    from engine.settings import Settings
    from storage.library import Library

    torch.set_num_threads(1)
    raw = load_encoder("cpu")
    encoder = _Memo(raw)
    lib = Library(db)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "sections.jsonl", "a") as f:
        for sm in stored_manuals(db, manuals, n_sections):
            t_manual = time.perf_counter()
            ev = lib.get_evidence(sm.doc_id, evidence_fingerprint(
                for_evidence(raw, Settings().evidence_precision)))
            dense = ev.dense if ev is not None else None
            if dense is None:
                print(f"{sm.key}: no stored dense evidence (section cosine left out)", flush=True)
            for q in sm.questions:
                t = time.perf_counter()
                qq = Question.read(q.question)
                pairs = sm.ranked(q.question)
                sents = sentences.candidates([s for s, _ in pairs])
                sentences.score(encoder, qq, sents, sentences.ScoreRule())
                score_ms = (time.perf_counter() - t) * 1e3
                qv = encoder.encode_query(qq.text)
                qtok = set(qq.tokens)
                by_node: dict[int, list] = {}
                for s in sents:
                    by_node.setdefault(s.node_id, []).append(s)

                def unit(s):
                    quote = quoting._quote_from(s, sents, sm.page_of)
                    return {"order": s.order, "unit": s.text, "kind": s.kind,
                            "shape": unit_prior.shape_of(s), "index": s.index, "head": s.head,
                            "entry": s.entry, "words": len(s.text.split()), "score": s.score,
                            "cos": s.cosine, "lex": s.lexical,
                            "hm": sentences.heading_match(qtok, s.path),
                            "fit": float(fits(qq.kind, s.kind, s.text)),
                            "quote": quote.text, "page": quote.page,
                            "holds": holds(q, quote.text),
                            "page_right": bool(q.pages) and quote.page in q.pages,
                            "fragment": quoting.is_fragment(quote.text)}

                sections = []
                for rank, (sec, bm) in enumerate(pairs):
                    units = sorted(by_node.get(sec.node_id, []), key=lambda s: s.index)
                    words = set(lexical.evidence_tokens([sec.heading], sec.body))
                    sections.append({
                        "node": sec.node_id, "rank": rank, "bm25": round(bm, 4),
                        "dense": (None if dense is None
                                  else round(float(dense[sec.node_id] @ qv), 4)),
                        "heading": sec.heading,
                        "title_hm": round(sentences.heading_match(qtok, sec.heading), 4),
                        "cover": round(len(qtok & words) / max(1, len(qtok)), 4),
                        "n_units": len(units),
                        "top": sorted((s.score for s in units), reverse=True)[:3],
                        "holds": holds(q, sec.body),
                        "units": [unit(s) for s in units if s.score >= REACH or s.index == 0]})
                f.write(json.dumps({"id": q.id, "manual": sm.key, "pages": sm.manual.pages,
                                    "question": q.question, "qkind": qq.kind,
                                    "in_walk": any(s["holds"] for s in sections),
                                    "score_ms": round(score_ms, 1),
                                    "sections": sections}) + "\n")
                f.flush()
            print(f"{sm.key}: {len(sm.questions)} questions, "
                  f"{time.perf_counter() - t_manual:.0f} s", flush=True)


def rescore(rows: list[dict], top: int, out: Path) -> None:
    """Each row's first ``top`` distinct quotes in the linear order read by the query-likelihood
    scorer (field "ql" on those units; "ql_ms", "ql_tokens" on the row)."""
    import torch

    from engine.answer.passages import rerank
    from engine.memory.backbone import load_backbone
    from engine.settings import Settings

    torch.set_num_threads(1)
    bb = load_backbone(Settings.from_env())
    scorer = rerank.QueryLikelihood(rerank.bfloat16_copy(bb.model), bb.tokenizer)
    with open(out, "w") as f:
        for n, r in enumerate(rows, 1):
            head, seen = [], set()
            for u in linear_order(r):
                if u["quote"] not in seen and not u["fragment"]:
                    seen.add(u["quote"])
                    head.append(u)
                if len(head) >= top:
                    break
            t = time.perf_counter()
            got, tokens = scorer.scores(r["question"], [u["quote"] for u in head]) if head \
                else ([], 0)
            r["ql_ms"], r["ql_tokens"] = round((time.perf_counter() - t) * 1e3, 1), tokens
            for u, v in zip(head, got):
                u["ql"] = float(v)
            f.write(json.dumps(r) + "\n")
            f.flush()
            if n % 20 == 0:
                print(f"{n}/{len(rows)} rescored", flush=True)


# -- replay ---------------------------------------------------------------------------------------

def units_of(row: dict):
    """Every recorded unit of the row, with its section."""
    for sec in row["sections"]:
        for u in sec["units"]:
            yield sec, u


def linear_order(row: dict) -> list[dict]:
    """The recorded units as the shipped quote stage ranks them: at or above the bar, best
    first (ties in document order), the first ``RECORDED``."""
    above = [u for _, u in units_of(row) if u["score"] >= THRESHOLD]
    return sorted(above, key=lambda u: (-u["score"], u["order"]))[:RECORDED]


SECTION_FEATURES = ("top2", "cover", "title", "dense", "bm25")


def section_features(row: dict, sec: dict) -> dict[str, float]:
    """A routed section's features besides its best unit's score: ``top2`` the mean of its two
    best unit scores less the best (0 for a section of one unit: a section that answers in
    more than one place loses less), ``cover`` the share of the question's words in its heading
    path and text, ``title`` in its heading path, ``dense`` the cosine of the question to its
    evidence vector, ``bm25`` its BM25 over the best routed section's."""
    best_bm = max(s["bm25"] for s in row["sections"]) or 1.0
    top = sec["top"]
    return {"top2": (float(np.mean(top[:2])) - top[0]) if len(top) > 1 else 0.0,
            "cover": sec["cover"], "title": sec["title_hm"],
            "dense": sec["dense"] or 0.0, "bm25": sec["bm25"] / best_bm}


def section_score(row: dict, sec: dict, weights: dict[str, float]) -> float:
    """The section's best unit's score plus its weighted features (``section_features``)."""
    feats = section_features(row, sec)
    return sec["top"][0] + sum(w * feats[k] for k, w in weights.items())


def pick(sec: dict, margin: float | None) -> list[dict]:
    """The section's units in the order the quote reads them: its best units first, or (with
    ``margin``) its opening first when the opening scores within ``margin`` of its best unit
    and makes no fragment; units below the bar kept out but for that opening."""
    units = sorted((u for u in sec["units"] if u["score"] >= THRESHOLD),
                   key=lambda u: (-u["score"], u["order"]))
    if margin is None or not units:
        return units
    opening = next((u for u in sec["units"] if u["index"] == 0), None)
    if opening is None or opening["fragment"] or opening["score"] < units[0]["score"] - margin:
        return units
    return [opening] + [u for u in units if u is not opening]


def section_order(row: dict, weights: dict[str, float], margin: float | None,
                  grouped: bool) -> list[dict]:
    """The units as a section-level rule reads them: the routed sections with a unit at or
    above the bar ordered by ``section_score``, then each section's units (``pick``):
    ``grouped``, a section's units before the next section's; else the first unit of each
    section in turn, then the rest in the linear order (the passages come from other
    sections)."""
    secs = [s for s in row["sections"] if s["top"] and s["top"][0] >= THRESHOLD]
    secs.sort(key=lambda s: (-section_score(row, s, weights), s["rank"]))
    picks = [pick(s, margin) for s in secs]
    if grouped:
        out = [u for p in picks for u in p]
    else:
        out = [p[0] for p in picks if p]
        taken = {id(u) for u in out}
        out += [u for u in linear_order(row) if id(u) not in taken]
    return out[:RECORDED]


def verdicts(cands: list[dict]) -> tuple[bool, bool, bool]:
    quote, shown = replay(cands)
    return (bool(quote and quote["holds"]), bool(quote and quote["page_right"]),
            any(p["holds"] for p in shown))


def section_right(row: dict, cands: list[dict]) -> bool:
    """Whether the quote's section holds the key in its text (the right section chosen)."""
    quote, _ = replay(cands)
    if quote is None:
        return False
    return any(s["holds"] for s in row["sections"] for u in s["units"] if u is quote)


def blend(cands: list[dict], top: int, w: float) -> list[dict]:
    """The first ``top`` candidates read by the likelihood (``rescore``: distinct passages, no
    fragment) reordered by ``z(linear) + w z(likelihood)``; the rest after them."""
    from engine.answer.passages.rerank import _z

    head = [c for c in cands if c.get("ql") is not None][:top]
    if w == 0 or len(head) < 2:
        return cands
    mixed = _z(np.array([c["score"] for c in head])) + w * _z(np.array([c["ql"] for c in head]))
    return [head[i] for i in np.argsort(-mixed, kind="stable")] \
        + [c for c in cands if c not in head]


def held_out(rows: list[dict], order_of, grid: list) -> dict:
    """Each manual's grid point chosen on the other manuals' questions (most quotes holding the
    key; ties to the first point of the grid, which lists the smaller weights first)."""
    memo = {i: [(r["manual"], verdicts(order_of(r, g))[0]) for r in rows]
            for i, g in enumerate(grid)}
    chosen = {}
    for m in {r["manual"] for r in rows}:
        best = max(range(len(grid)), key=lambda i: (sum(v for k, v in memo[i] if k != m), -i))
        chosen[m] = grid[best]
    return chosen


def table(rows: list[dict], variants: list[tuple[str, object]]) -> str:
    out = ["| order | " + " | ".join(f"{b} ({sum(band(r['pages']) == b for r in rows)})"
                                      for b, _ in BANDS)
           + f" | all ({len(rows)}) | right section first |",
           "| --- |" + " ---: |" * (len(BANDS) + 2)]
    for name, order_of in variants:
        cells, tot, right = [], np.zeros(3, int), 0
        for b, _ in BANDS:
            rs = [r for r in rows if band(r["pages"]) == b]
            orders = [order_of(r) for r in rs]
            v = np.array([verdicts(c) for c in orders], int).reshape(-1, 3).sum(0)
            right += sum(section_right(r, c) for r, c in zip(rs, orders))
            tot += v
            cells.append(f"{v[0]} / {v[1]} / {v[2]}")
        n = len(rows)
        out.append(f"| {name} | " + " | ".join(cells)
                   + f" | {tot[0]} ({100 * tot[0] / n:.0f}%) / {tot[1]} / {tot[2]} | {right} |")
    return "\n".join(out)


W = (0.0, 0.05, 0.1, 0.2, 0.3)
MARGINS = (None, 0.0, 0.05, 0.1, 0.2, 0.3)
QL_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 100.0)  # 100: the likelihood alone


def variants_of(rows: list[dict], notes: list[str],
                ql_tops: tuple[int, ...] = (3,)) -> list[tuple[str, object]]:
    """(name, row -> candidates) for the linear order and each section-level rule, held out;
    with rows ``rescore`` read, the likelihood's blend over each of ``ql_tops`` (at most the
    rescore's ``--top``)."""
    out = [("linear score (shipped)", linear_order)]

    def held(name, order_of, grid, fmt):
        chosen = held_out(rows, order_of, grid)
        notes.append(f"{name}: " + ", ".join(f"{m} {fmt(c)}" for m, c in sorted(chosen.items())))
        fixed = [(fmt(g), sum(verdicts(order_of(r, g))[0] for r in rows)) for g in grid]
        notes.append(f"{name}, each fixed grid point, quotes holding: "
                     + "; ".join(f"{k}: {v}" for k, v in fixed))
        out.append((f"{name}, held out", lambda r, c=chosen: order_of(r, c[r["manual"]])))

    for grouped in (True, False):
        how = "grouped" if grouped else "one unit a section"
        out.append((f"sections by their best unit, {how}",
                    lambda r, g=grouped: section_order(r, {}, None, g)))
        for feat in SECTION_FEATURES:
            held(f"section score + {feat}, {how}",
                 lambda r, w, f=feat, g=grouped: section_order(r, {f: w}, None, g),
                 list(W), lambda w: f"{w:g}")
        held(f"opening within a margin of the section's best, {how}",
             lambda r, m, g=grouped: section_order(r, {}, m, g), list(MARGINS),
             lambda m: "off" if m is None else f"{m:g}")
    grid = [dict(zip(SECTION_FEATURES, ws)) for ws in itertools.product(W[:3], repeat=5)]
    held("all five section features, grouped",
         lambda r, ws: section_order(r, ws, None, True), grid,
         lambda ws: "/".join(f"{w:g}" for w in ws.values()))
    grid2 = [(ws, m) for ws in grid[::1] for m in (None, 0.05, 0.1)]
    held("all five section features and the opening margin, grouped",
         lambda r, g: section_order(r, g[0], g[1], True), grid2,
         lambda g: "/".join(f"{w:g}" for w in g[0].values())
         + f" m {'off' if g[1] is None else g[1]}")
    out.append(("a learned section score (logistic, fitted on the other manuals)",
                learned_orders(rows)))
    if all("ql_ms" in r for r in rows):
        for top in ql_tops:
            held(f"likelihood over the best {top}, blended",
                 lambda r, w, t=top: blend(linear_order(r), t, w), list(QL_WEIGHTS),
                 lambda w: f"{w:g}")
        ms = [r["ql_ms"] for r in rows]
        notes.append(f"likelihood over each row's rescored passages: median {np.median(ms):.0f}"
                     f" ms a question (p90 {np.percentile(ms, 90):.0f}), batch positions median "
                     f"{np.median([r['ql_tokens'] for r in rows]):.0f}")
    return out


LEARNED_FEATURES = ("best less the question's best", "top2", "cover less the question's best",
                    "title", "dense less the question's best", "bm25", "log walk rank",
                    "log units")


def learned_features(row: dict) -> tuple[list[dict], np.ndarray]:
    """The routed sections with a unit at or above the bar and their ``LEARNED_FEATURES``
    (``section_features``, read against the question's best section where marked)."""
    secs = [s for s in row["sections"] if s["top"] and s["top"][0] >= THRESHOLD]
    if not secs:
        return secs, np.zeros((0, len(LEARNED_FEATURES)))
    feats = [section_features(row, s) for s in secs]
    best = max(s["top"][0] for s in secs)
    dense = max(f["dense"] for f in feats)
    cover = max(f["cover"] for f in feats)
    return secs, np.array([[s["top"][0] - best, f["top2"], f["cover"] - cover, f["title"],
                            f["dense"] - dense, f["bm25"], np.log1p(s["rank"]),
                            np.log1p(s["n_units"])] for s, f in zip(secs, feats)])


def right_section(sec: dict) -> bool:
    """A section one of whose units at the bar starts a quote that holds the key."""
    return any(u["holds"] and u["score"] >= THRESHOLD for u in sec["units"])


def learned_orders(rows: list[dict]):
    """row -> candidates: the sections ordered by a logistic model of ``right_section`` over
    ``LEARNED_FEATURES``, fitted on the other manuals' questions (leave one manual out), then
    each section's best units (``pick``)."""
    from sklearn.linear_model import LogisticRegression

    data = {r["id"]: learned_features(r) for r in rows}
    orders = {}
    for m in {r["manual"] for r in rows}:
        train = [data[r["id"]] for r in rows if r["manual"] != m]
        x = np.vstack([f for _, f in train if len(f)])
        y = np.concatenate([[right_section(s) for s in secs] for secs, f in train if len(f)])
        model = LogisticRegression(C=1.0, max_iter=1000).fit(x, y)
        for r in rows:
            if r["manual"] != m:
                continue
            secs, f = data[r["id"]]
            if not len(f):
                orders[r["id"]] = linear_order(r)
                continue
            by = np.argsort(-model.decision_function(f), kind="stable")
            orders[r["id"]] = [u for i in by for u in pick(secs[i], None)][:RECORDED]
    return lambda r: orders[r["id"]]


def oracle(rows: list[dict]) -> str:
    """The ceiling of a section-level choice: quotes holding the key when the first routed
    section (by its best unit) whose text holds the key is chosen, then its best unit."""
    got = {b: 0 for b, _ in BANDS}
    for r in rows:
        secs = [s for s in r["sections"] if s["top"] and s["top"][0] >= THRESHOLD and s["holds"]]
        if secs:
            sec = min(secs, key=lambda s: (-s["top"][0], s["rank"]))
            rest = [u for u in linear_order(r) if u not in sec["units"]]
            got[band(r["pages"])] += verdicts(pick(sec, None) + rest)[0]
    return "the right section chosen by hand, then its best unit, quotes holding: " + ", ".join(
        f"{b} {got[b]}/{sum(band(r['pages']) == b for r in rows)}" for b, _ in BANDS)


def misses(rows: list[dict]) -> str:
    """Over 300 pages: where the right section is among the routed ones, the linear order's
    quote misses, and how the right section ranks by its best unit."""
    out, counts = [], {"right section first by its best unit": 0, "2nd-5th": 0, "6th or later": 0,
                       "no unit at the bar": 0, "not routed": 0}
    for r in rows:
        if band(r["pages"]) != "over 300 pages" or verdicts(linear_order(r))[0]:
            continue
        secs = [s for s in r["sections"] if s["top"] and s["top"][0] >= THRESHOLD]
        secs.sort(key=lambda s: (-s["top"][0], s["rank"]))
        at = next((i for i, s in enumerate(secs) if s["holds"]), None)
        if not any(s["holds"] for s in r["sections"]):
            counts["not routed"] += 1
        elif at is None:
            counts["no unit at the bar"] += 1
        else:
            counts["right section first by its best unit" if at == 0
                   else "2nd-5th" if at < 5 else "6th or later"] += 1
            s = secs[at]
            out.append(f"- {r['id']}: right section {at + 1} of {len(secs)} (walk rank "
                       f"{s['rank'] + 1}, best {s['top'][0]:.3f} vs {secs[0]['top'][0]:.3f}, "
                       f"cover {s['cover']:.2f} vs {secs[0]['cover']:.2f}, dense "
                       f"{s['dense'] or 0:.3f} vs {secs[0]['dense'] or 0:.3f}) | "
                       f"{s['heading'][-50:]!r} vs {secs[0]['heading'][-50:]!r}")
    return "\n".join([", ".join(f"{k}: {v}" for k, v in counts.items())] + out)


def report(rows: list[dict], ql_tops: tuple[int, ...] = (3,)) -> str:
    notes: list[str] = []
    variants = variants_of(rows, notes, ql_tops)
    ms = [r["score_ms"] for r in rows]
    notes.append(f"linear score: median {np.median(ms):.0f} ms a question "
                 f"(p90 {np.percentile(ms, 90):.0f})")
    notes.append(oracle(rows))
    return "\n\n".join([table(rows, variants), "\n".join(notes), misses(rows)])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.section_probe")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--db", default="sqlite:///data/probe/lib.sqlite3")
    c.add_argument("--manuals", help="comma-separated manual keys (default: every manual)")
    c.add_argument("--sections", type=int, default=50)
    c.add_argument("--out", type=Path, default=Path("out/section"))
    s = sub.add_parser("rescore")
    s.add_argument("--rows", type=Path, nargs="+", required=True)
    s.add_argument("--top", type=int, default=3)
    s.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("report")
    r.add_argument("--rows", type=Path, nargs="+", required=True)
    r.add_argument("--ql-tops", default="3",
                   help="the likelihood's tops (rows rescored with at least that --top)")
    a = ap.parse_args(argv)
    if a.cmd == "collect":
        collect(a.db, a.manuals.split(",") if a.manuals else None, a.sections, a.out)
        return
    rows = list({r["id"]: r for r in (json.loads(x) for p in a.rows for x in open(p))}.values())
    if a.cmd == "rescore":
        rescore(rows, a.top, a.out)
    else:
        print(report(rows, tuple(int(t) for t in a.ql_tops.split(","))))


if __name__ == "__main__":
    main()
