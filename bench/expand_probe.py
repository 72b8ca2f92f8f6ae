"""Entry expansion on the dev probe, by size band, every weight held out by manual (issue 66).

    python -m bench.expand_probe collect [--db URL] [--manuals LIST] [--out DIR]
    python -m bench.expand_probe report --rows DIR/units.jsonl

``collect`` reads each probe manual's tree from the probe library (``--db``, default
data/probe/lib.sqlite3: the trees ingest stored, so nothing is built again), stands in for the
walk as ``bench.rerank_probe`` does (the 50 best sections by BM25), and scores the routed
units with the linear score (``sentences.score``) three ways: as shipped ("base"); with the
back-of-book index's terms for each unit's page read with its heading path by the word match
("index", ``expansion.BackIndex``); and by the encoder too ("index+dense"). For each question
it writes every unit that could reach the quote's bar under some weight: each variant's
cosine and word match, the heading match, the answer-type fit, its index terms and their
match with the question (``expansion.terms_match``), and the quote that would start at it
(holds the key, begins on a gold page, a fragment). The entry-kind agreement
(``expansion.kind_agreement``) is read by ``report`` from the recorded unit.

``report`` replays the quote and the three passages (``bench.rerank_probe.replay``) for the
linear order of each variant and for the kind agreement's weights, each weight chosen leave one
manual out (the weights that give the other manuals' questions the most quotes holding the
key, ties to the smaller weights), by size band; and the failure analysis of the linear score's
misses (where the right unit ranks, what outranks it).
"""
from __future__ import annotations

import argparse
import json
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from bench.rerank_probe import BANDS, band, replay

VARIANTS = ("base", "index", "index+dense")
AGREE = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3)  # the kind agreement's weight
DISAGREE = (0.0, 0.05, 0.1, 0.2)  # the kind disagreement's (subtracted)
TERMS = (0.0, 0.05, 0.1, 0.2, 0.3)  # the index terms' own word match's weight
RECORDED = 30


def collect(db: str, manuals: list[str] | None, n_sections: int, out: Path) -> None:
    import torch

    from bench.probe_set import holds, stored_manuals
    from engine.answer.passages import expansion, sentences
    from engine.answer.passages import quote as quoting
    from engine.answer.passages.answer_type import fits
    from engine.answer.question import Question
    from engine.routing.dense import load_encoder

    torch.set_num_threads(1)
    encoder = _Memo(load_encoder("cpu"))
    out.mkdir(parents=True, exist_ok=True)
    bar = sentences.THRESHOLD - max(AGREE) - 0.05
    with open(out / "units.jsonl", "a") as f:
        for sm in stored_manuals(db, manuals, n_sections):
            key, m, mine, walk, page_of = sm.key, sm.manual, sm.questions, sm.walk, sm.page_of
            t = time.perf_counter()
            back = expansion.BackIndex.build(sm.tree)
            build_s = time.perf_counter() - t
            print(f"{key}: index {build_s:.1f} s, {len(back)} index terms", flush=True)

            for q in mine:
                t = time.perf_counter()
                qq = Question.read(q.question)
                sents = sentences.candidates(walk(q.question))
                unit_pages = [page_of(s) for s in sents]
                terms = [back.terms_on(p) for p in unit_pages]
                expand_ms = (time.perf_counter() - t) * 1e3
                comps = {}
                for v in VARIANTS:
                    ranked = sentences.score(encoder, qq, sents, expanded=sentences.Expanded(
                        terms=None if v == "base" else terms, dense=v == "index+dense"))
                    comps[v] = {id(s): (s.cosine, s.lexical) for s in ranked}
                ranked = sents  # _quote_from reads the units of the best one's section
                idx = expansion.terms_match(qq, terms)
                qtok = set(qq.tokens)
                units = []
                for s in sents:
                    head = sentences.heading_match(qtok, s.path)
                    fit = float(fits(qq.kind, s.kind, s.text))
                    base = {v: comps[v][id(s)] for v in VARIANTS}
                    top = max(c + sentences.LEXICAL_WEIGHT * x for c, x in base.values())
                    if top + 0.2 * head + 0.1 * fit + max(TERMS) * idx[s.order] < bar:
                        continue
                    quote = quoting._quote_from(s, ranked, page_of)
                    units.append({"order": s.order, "unit": s.text, "kind": s.kind,
                                  "entry": s.entry, "heading": s.heading, "head": head,
                                  "fit": fit, "comps": base, "terms": terms[s.order],
                                  "idx": float(idx[s.order]),
                                  "quote": quote.text, "page": quote.page,
                                  "holds": holds(q, quote.text),
                                  "page_right": bool(q.pages) and quote.page in q.pages,
                                  "fragment": quoting.is_fragment(quote.text)})
                any_holds = any(holds(q, s.text) for s in sents)
                f.write(json.dumps({"id": q.id, "manual": key, "pages": m.pages,
                                    "question": q.question, "qkind": qq.kind,
                                    "in_walk": any_holds,
                                    "expand_ms": round(expand_ms, 1),
                                    "units": units}) + "\n")
                f.flush()
            print(f"{key}: {len(mine)} questions", flush=True)


class _Memo:
    """The sentence encoder with its vectors kept by text (the variants share most texts)."""

    def __init__(self, encoder):
        self.encoder, self.known = encoder, {}

    def encode(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self.known]
        if todo:
            self.known.update(zip(todo, self.encoder.encode(todo)))
        if len(self.known) > 50_000:
            self.known.clear()
            return self.encoder.encode(texts)
        return np.stack([self.known[t] for t in texts])

    def encode_query(self, text: str) -> np.ndarray:
        if ("?", text) not in self.known:
            self.known[("?", text)] = self.encoder.encode_query(text)
        return self.known[("?", text)]


# -- replay ---------------------------------------------------------------------------------------

def agreement(row: dict, u: dict) -> int:
    """The unit's entry-kind agreement with the question (``expansion.kind_agreement``: its
    entry's signature, else its own text, and its section's heading path)."""
    from engine.answer.passages import expansion

    if "agree" not in u:
        wanted = expansion.wanted_kinds(row["question"])
        u["agree"] = expansion.kind_agreement(
            wanted, expansion.entry_kinds(u["entry"] or u["unit"], u["heading"]))
    return u["agree"]


def ordered(row: dict, variant: str, agree: float = 0.0, disagree: float = 0.0,
            terms: float = 0.0, threshold: float = 0.70) -> list[dict]:
    """The recorded units as the quote stage would rank them under ``variant`` and the kind
    weights: at or above the bar, best first, the first ``RECORDED``."""
    scored = []
    for u in row["units"]:
        agreement(row, u)
        c, x = u["comps"][variant]
        sc = c + 0.5 * x + 0.2 * u["head"] + 0.1 * u["fit"]
        sc += agree * (u["agree"] > 0) - disagree * (u["agree"] < 0) + terms * u["idx"]
        sc = round(sc, 4)
        if sc >= threshold:
            scored.append((-sc, u["order"], u))
    return [u for _, _, u in sorted(scored, key=lambda t: t[:2])][:RECORDED]


def verdicts(row: dict, variant: str, agree: float = 0.0, disagree: float = 0.0,
             terms: float = 0.0):
    quote, shown = replay(ordered(row, variant, agree, disagree, terms))
    return (bool(quote and quote["holds"]), bool(quote and quote["page_right"]),
            any(p["holds"] for p in shown))


def held_out(rows: list[dict], grid: list[tuple]) -> dict:
    """Each manual's (variant, agree, disagree) chosen on the other manuals' questions."""
    chosen = {}
    for m in {r["manual"] for r in rows}:
        others = [r for r in rows if r["manual"] != m]
        chosen[m] = max(grid, key=lambda g: (sum(verdicts(r, *g)[0] for r in others),
                                             -sum(g[1:]), -VARIANTS.index(g[0])))
    return chosen


def table(rows: list[dict], variants: list[tuple[str, object]]) -> str:
    out = ["| order | " + " | ".join(f"{b} ({sum(band(r['pages']) == b for r in rows)})"
                                      for b, _ in BANDS) + f" | all ({len(rows)}) |",
           "| --- |" + " ---: |" * (len(BANDS) + 1)]
    for name, pick in variants:
        cells, tot = [], np.zeros(3, int)
        for b, _ in BANDS:
            rs = [r for r in rows if band(r["pages"]) == b]
            v = np.array([pick(r) for r in rs], int).reshape(-1, 3).sum(0)
            tot += v
            cells.append(f"{v[0]} / {v[1]} / {v[2]}")
        n = len(rows)
        out.append(f"| {name} | " + " | ".join(cells)
                   + f" | {tot[0]} ({100 * tot[0] / n:.0f}%) / {tot[1]} / {tot[2]} |")
    return "\n".join(out)


def failures(rows: list[dict], variant: str = "base") -> str:
    """Where the right unit ranks under the linear score on the misses over 300 pages, and
    what the unit ranked first is."""
    big = [r for r in rows if band(r["pages"]) == "over 300 pages"]
    miss = [r for r in big if not verdicts(r, variant)[0]]
    rank_of, first = Counter(), Counter()
    for r in miss:
        order = ordered(r, variant)
        at = next((i for i, u in enumerate(order) if u["holds"]), None)
        if not r["in_walk"]:
            rank_of["no routed unit holds the key (the walk)"] += 1
        elif at is None:
            rank_of["below the bar or past the 30th"] += 1
        else:
            rank_of[f"rank {'2-3' if at < 3 else '4-10' if at < 10 else '11-30'}"] += 1
        if order:
            top = order[0]
            right = next((u for u in order if u["holds"]), None)
            same = right is not None and top["heading"] == right["heading"]
            what = ("code or command line" if top["kind"] in ("line", "intro")
                    else "another entry" if top["kind"] == "entry"
                    else "a table row" if top["kind"] == "row" else "a prose sentence")
            first[f"first: {what}{', same section as the right one' if same else ''}"] += 1
            if top["agree"] < 0:
                first["first: an entry of another kind than the question names"] += 1
            if right is not None:
                from engine.answer.passages.expansion import entry_kinds

                a, b = (entry_kinds(u["entry"] or u["unit"], u["heading"]) for u in (top, right))
                if a and b and not a & b:
                    first[f"kinds differ: {'/'.join(sorted(a))} first, "
                          f"{'/'.join(sorted(b))} right"] += 1
                if top["comps"][variant][1] > right["comps"][variant][1]:
                    first["first matches more of the question's words (BM25)"] += 1
                if top["comps"][variant][0] > right["comps"][variant][0]:
                    first["first closer in meaning (cosine)"] += 1
        else:
            first["no unit at the bar"] += 1
    lines = [f"misses over 300 pages: {len(miss)} of {len(big)}"]
    lines += [f"- {k}: {v}" for k, v in sorted(rank_of.items())]
    lines += [f"- {k}: {v}" for k, v in sorted(first.items())]
    return "\n".join(lines)


def report(rows: list[dict]) -> str:
    grid_text = [(v, 0.0, 0.0) for v in VARIANTS]
    grid_kind = [("base", a, d) for a in AGREE for d in DISAGREE]
    grid_terms = [("base", 0.0, 0.0, w) for w in TERMS]
    grid_all = [(v, a, d, w) for v in VARIANTS for a in AGREE for d in DISAGREE
                for w in (TERMS if v == "base" else (0.0,))]
    lines = []
    variants = [(f"{v} (linear order)", lambda r, v=v: verdicts(r, v)) for v in VARIANTS]
    for name, grid in (("index terms, variant held out", grid_text),
                       ("index terms' own match, weight held out", grid_terms),
                       ("kind agreement, weights held out", grid_kind),
                       ("index terms + kind agreement, all held out", grid_all)):
        chosen = held_out(rows, grid)
        lines.append(f"{name}: " + ", ".join(f"{m} {'/'.join(map(str, c))}"
                                             for m, c in sorted(chosen.items())))
        variants.append((name, lambda r, c=chosen: verdicts(r, *c[r["manual"]])))
    variants.append(("kind agreement 0.1 (fixed)", lambda r: verdicts(r, "base", 0.1)))
    variants.append(("index terms' match 0.1 (fixed)",
                     lambda r: verdicts(r, "base", 0.0, 0.0, 0.1)))
    for name, grid in (("kind agree/mismatch", grid_kind), ("terms' match", grid_terms)):
        cells = []
        for g in grid:
            big = [r for r in rows if band(r["pages"]) == "over 300 pages"]
            cells.append(f"{'/'.join(map(str, g[1:]))}: {sum(verdicts(r, *g)[0] for r in rows)}"
                         f" ({sum(verdicts(r, *g)[0] for r in big)} over 300 p.)")
        lines.append(f"{name}, fixed weights, quotes holding: " + "; ".join(cells))
    ms = [r["expand_ms"] for r in rows]
    lines.append(f"locating each routed unit's page and its index terms: median "
                 f"{np.median(ms):.0f} ms a question (p90 {np.percentile(ms, 90):.0f})")
    return "\n\n".join([table(rows, variants), "\n".join(lines), failures(rows)])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.expand_probe")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--db", default="sqlite:///data/probe/lib.sqlite3")
    c.add_argument("--manuals", help="comma-separated manual keys (default: every manual)")
    c.add_argument("--sections", type=int, default=50)
    c.add_argument("--out", type=Path, default=Path("out/expand"))
    r = sub.add_parser("report")
    r.add_argument("--rows", type=Path, nargs="+", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "collect":
        collect(a.db, a.manuals.split(",") if a.manuals else None, a.sections, a.out)
    else:
        rows = list({r["id"]: r for r in (json.loads(x) for p in a.rows for x in open(p))}
                    .values())
        for r in rows:  # the kind agreement is read here, with the current cues
            for u in r["units"]:
                u.pop("agree", None)
        print(report(rows))


if __name__ == "__main__":
    main()
