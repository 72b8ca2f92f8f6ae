"""The quote's second stage on the dev probe, by size band, its blend weight held out by manual
(issue 66).

    python -m bench.rerank_probe collect [--manuals LIST] [--top 12] [--out DIR]
    python -m bench.rerank_probe rescore --rows DIR/candidates.jsonl [--top 8] --out FILE
    python -m bench.rerank_probe report --rows DIR/candidates.jsonl [--tops 4,8,12]

``collect`` stands in for the walk as ``bench.probe_stage`` does (each manual's tree built as
ingest builds it, the 50 best sections by BM25), ranks the routed units by the linear score
(``sentences.score``, the shipped quote stage), and for each question writes one row with the
first ``RECORDED`` candidates at or above the bar: the linear score, the quote and passage that
would start at the candidate (``quote._quote_from``), whether it holds the key and begins on a
gold page, whether it is a fragment, and for the ``--top`` best the second stage's score
(``rerank.QueryLikelihood``: the backbone's mean log-prob of the question given the entry, in
one batched pass) with the pass's time and batch size.

``rescore`` scores the recorded candidates again with the shipped scorer (another prompt
measured without building every tree again). ``report`` replays the quote and the three
passages (``quote.choose`` and ``quote.passages``:
fragments skipped, passages from other entries) for the linear order and for the blend
``z(linear) + w * z(likelihood)`` over the ``top`` best, with ``w`` chosen leave one manual out
(the weight that gives the other manuals' questions the most quotes that hold the key, ties to
the smaller weight) and with each fixed weight; figures per size band (under 150 pages, 150-300,
over 300) and overall.
"""
from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

RECORDED = 30  # candidates per question kept for the replay (passages read past the top)
WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 100.0)  # 100: the likelihood alone
BANDS = (("under 150 pages", 150), ("150-300 pages", 301), ("over 300 pages", None))


def band(pages: int) -> str:
    for name, below in BANDS:
        if below is None or pages < below:
            return name
    raise AssertionError


def collect(manuals: list[str] | None, top: int, n_sections: int, questions_file: Path | None,
            out: Path) -> None:
    import pymupdf
    import torch

    from bench.probe_set import QUESTIONS_FILE, holds, load_manuals, load_questions, manual_pdf
    from bench.quote_time import stood_in_walk
    from engine.answer.passages import quote as quoting
    from engine.answer.passages import inventory, rerank, sentences
    from engine.answer.passages.passage_index import PassageIndex
    from engine.answer.question import Question
    from engine.answer.passages.pages import _norm, locate_page
    from engine.document.build import build_tree
    from engine.memory.backbone import load_backbone
    from engine.routing.dense import load_encoder
    from engine.settings import Settings

    torch.set_num_threads(1)
    settings = Settings.from_env()
    bb = load_backbone(settings)
    tok = bb.tokenizer
    scorer = rerank.QueryLikelihood(rerank.bfloat16_copy(bb.model), tok)
    encoder = load_encoder("cpu")
    all_manuals = load_manuals()
    questions = load_questions(questions_file or QUESTIONS_FILE, manuals=all_manuals)
    wanted = manuals or list(dict.fromkeys(q.manual for q in questions))
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "candidates.jsonl", "a") as f:
        for key in wanted:
            mine = [q for q in questions if q.manual == key]
            if not mine:
                continue
            m = all_manuals[key]
            pdf = manual_pdf(m)
            t = time.perf_counter()
            tree = build_tree(pdf, lambda x: tok.encode(x, add_special_tokens=False), tok.decode,
                              settings.node_token_limit)
            with pymupdf.open(pdf) as doc:
                pages = [_norm(p.get_text()) for p in doc]
            walk = stood_in_walk(tree, n_sections)
            print(f"{key}: tree {time.perf_counter() - t:.0f} s", flush=True)

            def page_of(s):
                return locate_page(s.text, s.page_start, s.page_end, pages)

            index = PassageIndex.build(1, tree)
            inv = inventory.Inventory.build(index)

            def judged(q, ranked, known):
                """The recorded candidates of one ranking (``known``: unit text -> likelihood
                already computed; the top's others are scored here)."""
                bar = sentences.THRESHOLD
                above = [s for s in ranked[:RECORDED] if s.score >= bar]
                head = above[:top]
                todo = [s for s in head if s.text not in known]
                t = time.perf_counter()
                ql, tokens = scorer.scores(q.question, [rerank.passage_text(s, ranked)
                                                        for s in todo])
                ms = (time.perf_counter() - t) * 1e3
                known.update({s.text: float(v) for s, v in zip(todo, ql)})
                cands = []
                for i, s in enumerate(above):
                    quote = quoting._quote_from(s, ranked, page_of)
                    cands.append({"unit": s.text, "score": s.score,
                                  "ql": known[s.text] if i < len(head) else None,
                                  "quote": quote.text, "page": quote.page,
                                  "holds": holds(q, quote.text),
                                  "page_right": bool(q.pages) and quote.page in q.pages,
                                  "fragment": quoting.is_fragment(quote.text)})
                return cands, ms, tokens, len(head)

            for q in mine:
                t = time.perf_counter()
                found = walk(q.question)
                qq = Question.read(q.question)
                ranked = sentences.score(encoder, qq, sentences.candidates(found))
                linear_ms = (time.perf_counter() - t) * 1e3
                known: dict[str, float] = {}
                cands, ql_ms, tokens, n_top = judged(q, ranked, known)
                row = {"id": q.id, "manual": key, "pages": m.pages, "question": q.question,
                       "linear_ms": round(linear_ms, 1), "ql_ms": round(ql_ms, 1),
                       "ql_tokens": tokens, "ql_top": n_top, "candidates": cands}
                if inventory.asks_for_a_name(qq.kind):
                    t = time.perf_counter()
                    extra = inventory.extra_sections(tree, inv, qq, inventory.Kept(
                        1, {s.node_id for s in found}, lambda n: n))
                    ranked2 = sentences.score(encoder, qq,
                                              sentences.candidates(found + extra))
                    row["inventory_ms"] = round((time.perf_counter() - t) * 1e3, 1)
                    row["inventory_sections"] = len(extra)
                    row["inventory"] = judged(q, ranked2, known)[0]
                f.write(json.dumps(row) + "\n")
                f.flush()
            print(f"{key}: {len(mine)} questions", flush=True)


def rescore(rows: list[dict], top: int, out: Path, scorer: str = "likelihood",
            weights: Path | None = None) -> None:
    """Each row's ``top`` candidates scored again by a second-stage scorer on the passage a
    quote from each shows (which the row holds), written as a new candidates file: the second
    stage measured without building the trees again (``collect`` recorded the candidates).
    ``scorer`` "likelihood" (``rerank.QueryLikelihood``, field "ql") or "cross"
    (``cross_encoder.CrossEncoder``, field "ce", ``weights`` its fitted tensors; the other
    field is kept)."""
    import torch

    from engine.answer.passages import cross_encoder, rerank

    torch.set_num_threads(1)
    if scorer == "cross":
        model, key = cross_encoder.load(weights or cross_encoder.ASSET), "ce"
    else:
        from engine.memory.backbone import load_backbone
        from engine.settings import Settings

        bb = load_backbone(Settings.from_env())
        model, key = rerank.QueryLikelihood(rerank.bfloat16_copy(bb.model), bb.tokenizer), "ql"
    with open(out, "w") as f:
        for r in rows:
            head = r["candidates"][:top]
            t = time.perf_counter()
            got, tokens = model.scores(r["question"], [c["quote"] for c in head])
            r[f"{key}_ms"], r[f"{key}_tokens"] = round((time.perf_counter() - t) * 1e3, 1), tokens
            for i, c in enumerate(r["candidates"]):
                c[key] = float(got[i]) if i < len(head) else None
            for c in r.get("inventory") or []:
                c[key] = None  # not scored again: the inventory's replay reads the linear order
            f.write(json.dumps(r) + "\n")
            f.flush()


# -- replay ---------------------------------------------------------------------------------------

def _weights(weight) -> dict | None:
    """A weight (the likelihood's, the earlier form), a {field: weight} or None (linear)."""
    return weight if weight is None or isinstance(weight, dict) else {"ql": weight}


def order(row: dict, top: int, weight, field: str = "candidates") -> list[dict]:
    """The candidates in the order the quote stage would read them: linear (``weight`` None),
    or the ``top`` best reordered by the blend ``z(linear) + sum w z(score)`` over the
    ``weight`` {score field: w} ("ql" the likelihood, "ce" the cross-encoder; a number: the
    likelihood's); ``field`` "inventory": with the inventory's sections (a name question; the
    others have none and read the routed)."""
    from engine.answer.passages.rerank import _z

    cands = row.get(field) or row["candidates"]
    weights = _weights(weight)
    if weights is None:
        return cands
    head = [c for c in cands[:top] if all(c.get(k) is not None for k in weights)]
    if len(head) < 2:
        return cands
    mixed = _z(np.array([c["score"] for c in head], float))
    for k, w in weights.items():
        mixed = mixed + w * _z(np.array([c[k] for c in head], float))
    return [head[i] for i in np.argsort(-mixed, kind="stable")] + cands[len(head):]


def replay(cands: list[dict], n: int = 3, tries: int = 10) -> tuple[dict | None, list[dict]]:
    """(the quote, the passages) as ``quote.choose`` and ``quote.passages`` pick them."""
    quote = next((c for c in cands[:tries] if not c["fragment"]), None)
    if quote is None:
        return None, []
    chosen = [quote]
    for c in cands[:tries * n]:
        if len(chosen) >= n:
            break
        if any(c["unit"] in p["quote"] for p in chosen) or c["fragment"]:
            continue
        if any(c["quote"][:60] in p["quote"] or p["quote"][:60] in c["quote"] for p in chosen):
            continue
        chosen.append(c)
    return quote, chosen


def verdicts(row: dict, top: int, weight: float | None,
             field: str = "candidates") -> tuple[bool, bool, bool]:
    quote, shown = replay(order(row, top, weight, field))
    return (bool(quote and quote["holds"]), bool(quote and quote["page_right"]),
            any(p["holds"] for p in shown))


def held_out(rows: list[dict], top: int, grid=None) -> dict:
    """Each manual's weight chosen on the other manuals' questions (module docstring) among
    ``grid`` (weights or {field: weight}; default the likelihood's ``WEIGHTS``)."""
    grid = list(grid or WEIGHTS)
    by = defaultdict(list)
    for r in rows:
        by[r["manual"]].append(r)
    chosen = {}
    for m in by:
        others = [r for r in rows if r["manual"] != m]
        chosen[m] = max(grid, key=lambda w: (sum(verdicts(r, top, w)[0] for r in others),
                                             -sum(_weights(w).values())))
    return chosen


def table(rows: list[dict], variants: list[tuple[str, object]]) -> str:
    out = ["| variant | " + " | ".join(f"{b} (quote / page / passages)" for b, _ in BANDS)
           + " | all quote | all page | all passages |",
           "| --- |" + " ---: |" * (len(BANDS) + 3)]
    for name, pick in variants:
        cells, tot = [], np.zeros(3, int)
        for b, _ in BANDS:
            rs = [r for r in rows if band(r["pages"]) == b]
            v = np.array([pick(r) for r in rs], int).reshape(-1, 3).sum(0) if rs else np.zeros(3)
            tot += v.astype(int)
            cells.append(f"{int(v[0])}/{len(rs)} / {int(v[1])} / {int(v[2])}")
        n = len(rows)
        out.append(f"| {name} | " + " | ".join(cells) + f" | {tot[0]}/{n} ({100 * tot[0] / n:.0f}%)"
                   f" | {tot[1]}/{n} | {tot[2]}/{n} ({100 * tot[2] / n:.0f}%) |")
    return "\n".join(out)


def _blend_variants(rows, top, grid, name, alone, lines) -> list:
    chosen = held_out(rows, top, grid)
    lines.append(f"{name}, top {top}: weight chosen per held-out manual: " + ", ".join(
        f"{m} {'/'.join(f'{w:g}' for w in _weights(c).values())}"
        for m, c in sorted(chosen.items())))
    out = [(f"{name} blend, top {top}, weight held out by manual",
            lambda r, c=chosen: verdicts(r, top, c[r["manual"]]))]
    if alone is not None:
        out.append((f"{name} alone, top {top}", lambda r: verdicts(r, top, alone)))
    return out


def report(rows: list[dict], tops: list[int], cross_tops: list[int] = ()) -> str:
    variants = [("linear (shipped)", lambda r: verdicts(r, 0, None))]
    if any("inventory" in r for r in rows):
        variants.append(("linear + entry inventory (name questions)",
                         lambda r: verdicts(r, 0, None, "inventory")))
    lines = []
    for top in tops:
        variants += _blend_variants(rows, top, WEIGHTS, "likelihood", 100.0, lines)
        variants.append((f"likelihood blend, top {top}, weight 0.5",
                         lambda r, t=top: verdicts(r, t, 0.5)))
    cross = [r for r in rows if "ce_ms" in r]
    if cross and len(cross) == len(rows):
        for top in cross_tops:
            variants += _blend_variants(rows, top, [{"ce": w} for w in WEIGHTS], "cross",
                                        {"ce": 100.0}, lines)
            variants.append((f"cross blend, top {top}, weight 1",
                             lambda r, t=top: verdicts(r, t, {"ce": 1.0})))
        both = [{"ql": a, "ce": b} for a in (0.0, 0.25, 0.5, 0.75, 1.0)
                for b in (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)]
        variants += _blend_variants(rows, max(tops), both, "likelihood + cross", None, lines)
        ms, toks = [r["ce_ms"] for r in rows], [r["ce_tokens"] for r in rows]
        lines.append(f"cross-encoder over each question's rescored top: median "
                     f"{np.median(ms):.0f} ms (p90 {np.percentile(ms, 90):.0f}), batch "
                     f"positions median {np.median(toks):.0f}")
    ms = np.array([r["ql_ms"] for r in rows])
    lin = np.array([r["linear_ms"] for r in rows])
    toks = np.array([r["ql_tokens"] for r in rows])
    big = [r for r in rows if band(r["pages"]) == "over 300 pages"]
    inv = [r for r in rows if "inventory" in r]
    if inv:
        lines.append(f"entry inventory: {len(inv)} name questions, median "
                     f"{np.median([r['inventory_sections'] for r in inv]):.0f} sections added, "
                     f"linear stage with them median "
                     f"{np.median([r['inventory_ms'] for r in inv]):.0f} ms")
    lines.append(f"likelihood over each question's recorded top: median {np.median(ms):.0f} ms "
                 f"(p90 {np.percentile(ms, 90):.0f}), batch positions median "
                 f"{np.median(toks):.0f}; "
                 f"the linear stage median {np.median(lin):.0f} ms; {len(rows)} questions "
                 f"({len(big)} over 300 pages)")
    return table(rows, variants) + "\n\n" + "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.rerank_probe")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--manuals", help="comma-separated manual keys (default: every manual)")
    c.add_argument("--questions", type=Path, default=None)
    c.add_argument("--top", type=int, default=12)
    c.add_argument("--sections", type=int, default=50)
    c.add_argument("--out", type=Path, default=Path("out/rerank"))
    r = sub.add_parser("report")
    r.add_argument("--rows", type=Path, nargs="+", required=True,
                   help="candidates.jsonl files (a question in several: the last one's row)")
    r.add_argument("--tops", default="4,8,12")
    r.add_argument("--cross-tops", default="8,12,20,30",
                   help="the cross-encoder's tops (rows rescored with --scorer cross)")
    s = sub.add_parser("rescore")
    s.add_argument("--rows", type=Path, required=True)
    s.add_argument("--top", type=int, default=8)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--scorer", choices=("likelihood", "cross"), default="likelihood")
    s.add_argument("--weights", type=Path, default=None,
                   help="the cross-encoder's fitted tensors (default: the shipped asset)")
    a = ap.parse_args(argv)
    if a.cmd == "rescore":
        rescore([json.loads(x) for x in open(a.rows)], a.top, a.out, a.scorer, a.weights)
    elif a.cmd == "collect":
        collect(a.manuals.split(",") if a.manuals else None, a.top, a.sections, a.questions,
                a.out)
    else:
        rows = list({r["id"]: r for r in (json.loads(x) for p in a.rows for x in open(p))}
                    .values())  # a question in several files: the last file's row
        print(report(rows, [int(t) for t in a.tops.split(",")],
                     [int(t) for t in a.cross_tops.split(",") if t]))


if __name__ == "__main__":
    main()
