"""The unit within the section on the dev probe: what the linear score ranks first on big
manuals, and priors on the unit that might choose better, every weight held out by manual
(issue 66, fourth session).

    python -m bench.unit_probe collect [--db URL] [--manuals LIST] [--out DIR]
    python -m bench.unit_probe misses --rows DIR/units.jsonl [--n 20]
    python -m bench.unit_probe report --rows DIR/units.jsonl
    python -m bench.unit_probe compare DIR/units.jsonl OTHER/units.jsonl

``collect`` reads each probe manual's tree from the probe library and stands in for the walk as
``bench.expand_probe`` does (the 50 best sections by BM25), scores the routed units with the
linear score (``sentences.score``, without the code prior) and writes, per question, every unit
within reach of the quote's bar with its score's parts, where it sits (its index in its
section, its entry's first unit), its length, its shape (``unit_prior.shape_of``), the
question's kind, and the quote that would start at it (holds the key, begins on a gold page, a
fragment); and, for a code or other line, the prose or entry unit it belongs to
(``owner_of``), scored the same way (encoded when the linear score had not encoded it).

``misses`` prints the linear score's misses over 300 pages side by side (question, first unit,
right unit) for reading by hand. ``report`` replays the quote and the three passages
(``bench.rerank_probe.replay``) for the linear order and for each prior of
``engine.answer.passages.unit_prior``, each weight chosen leave one manual out (the weights
that give the other 13 manuals' questions the most quotes holding the key, ties to the smaller
weights), by size band. ``collect --windows bf16|int8`` encodes the windows in that precision
(the question in float32; ``--as-stored``: rounded to float16 as the library keeps them, what
an ask reads once they are stored), and ``compare`` reads two collections question by question: the
quote, page and passages verdicts, the quote's text, the units' cosines.
"""
from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np

from bench.rerank_probe import BANDS, band, replay

RECORDED = 30
REACH = 0.45  # units scored at least this are recorded (a prior adds at most ~0.3)


class _AsStored:
    """The texts' vectors rounded to float16, as the library stores them (``unit_vectors``): what
    an ask reads once a manual's passage vectors are stored."""

    def __init__(self, encoder):
        self.encoder = encoder

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.encoder.encode(texts).astype("<f2").astype(np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        return self.encoder.encode_query(text)


class _TextsBy:
    """Texts encoded by one encoder, questions by another (the windows in another precision,
    the question in float32 as an ask reads it)."""

    def __init__(self, texts, questions):
        self.texts, self.questions = texts, questions

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.texts.encode(texts)

    def encode_query(self, text: str) -> np.ndarray:
        return self.questions.encode_query(text)


def window_encoder(precision: str):
    """The encoder of the windows in ``precision`` (fp32, the shipped float32 one; bf16,
    ``dense.BFloat16Texts``; int8, dynamic int8), the question always in float32."""
    from engine.routing import dense

    base = dense.load_encoder("cpu")
    if precision == "bf16":
        return dense.BFloat16Texts(base)
    if precision == "int8":
        return _TextsBy(dense.SentenceEncoder("cpu", quantize="int8"), base)
    return base


def collect(db: str, manuals: list[str] | None, n_sections: int, out: Path,
            windows: str = "fp32", as_stored: bool = False) -> None:
    import torch

    from bench.expand_probe import _Memo
    from bench.probe_set import holds, stored_manuals
    from engine.answer.passages import quote as quoting
    from engine.answer.passages import sentences, unit_prior
    from engine.answer.passages.answer_type import fits
    from engine.answer.question import Question

    torch.set_num_threads(1)
    encoder = window_encoder(windows)
    encoder = _Memo(_AsStored(encoder) if as_stored else encoder)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "units.jsonl", "a") as f:
        for sm in stored_manuals(db, manuals, n_sections):
            key, m, mine, walk, page_of = sm.key, sm.manual, sm.questions, sm.walk, sm.page_of

            for q in mine:
                t = time.perf_counter()
                qq = Question.read(q.question)
                sents = sentences.candidates(walk(q.question))
                sentences.score(encoder, qq, sents, sentences.ScoreRule(code_weight=0.0))
                score_ms = (time.perf_counter() - t) * 1e3
                reach = [s for s in sents if s.score >= REACH]
                owners = {id(s): owner_of(s, sents) for s in reach}
                extra = [o for o in owners.values() if o is not None and o.cosine == 0.0]
                if extra:  # owners the linear score did not encode: encoded as it would
                    texts = {id(s): w for s, w in zip(sents, sentences.windows(sents))}
                    vec = encoder.encode([f"{o.path}: {texts[id(o)]}" if o.path
                                          else texts[id(o)] for o in extra])
                    for o, c in zip(extra, vec @ encoder.encode_query(qq.text)):
                        o.cosine = round(float(c), 4)
                qtok = set(qq.tokens)
                keep = {id(s): s for s in reach}
                keep.update((id(o), o) for o in owners.values() if o is not None)
                units = []
                for s in sorted(keep.values(), key=lambda s: s.order):
                    quote = quoting._quote_from(s, sents, page_of)
                    owner = owners.get(id(s))
                    units.append({"order": s.order, "unit": s.text, "kind": s.kind,
                                  "shape": unit_prior.shape_of(s), "index": s.index,
                                  "head": s.head, "node": s.node_id, "entry": s.entry,
                                  "heading": s.heading, "words": len(s.text.split()),
                                  "cos": s.cosine, "lex": s.lexical,
                                  "hm": sentences.heading_match(qtok, s.path),
                                  "fit": float(fits(qq.kind, s.kind, s.text)),
                                  "reach": id(s) in owners,
                                  "owner": None if owner is None else owner.order,
                                  "quote": quote.text, "page": quote.page,
                                  "holds": holds(q, quote.text),
                                  "page_right": bool(q.pages) and quote.page in q.pages,
                                  "fragment": quoting.is_fragment(quote.text)})
                f.write(json.dumps({"id": q.id, "manual": key, "pages": m.pages,
                                    "question": q.question, "qkind": qq.kind,
                                    "in_walk": any(holds(q, s.text) for s in sents),
                                    "score_ms": round(score_ms, 1), "units": units}) + "\n")
                f.flush()
            print(f"{key}: {len(mine)} questions", flush=True)


# -- replay ---------------------------------------------------------------------------------------

def linear(u: dict) -> float:
    """A recorded unit's linear score without the code prior (``sentences.score`` with
    ``code_weight`` 0: the rows are collected with it off, ``collect``)."""
    return u["cos"] + 0.5 * u["lex"] + 0.2 * u["hm"] + 0.1 * u["fit"]


def ordered(row: dict, prior, threshold: float = 0.70) -> list[dict]:
    """The recorded units as the quote stage ranks them with ``prior(row, unit, by_order)``
    added to the linear score: at or above the bar, best first, the first ``RECORDED``."""
    by_order = {u["order"]: u for u in row["units"]}
    scored = []
    for u in row["units"]:
        if not u["reach"]:
            continue
        sc = round(linear(u) + (prior(row, u, by_order) if prior else 0.0), 4)
        if sc >= threshold:
            scored.append((-sc, u["order"], u))
    return [u for _, _, u in sorted(scored, key=lambda t: t[:2])][:RECORDED]


def verdicts(row: dict, prior=None) -> tuple[bool, bool, bool]:
    quote, shown = replay(ordered(row, prior))
    return (bool(quote and quote["holds"]), bool(quote and quote["page_right"]),
            any(p["holds"] for p in shown))


def held_out(rows: list[dict], make, grid: list[tuple]) -> dict:
    """Each manual's weights chosen on the other manuals' questions (ties: smaller weights)."""
    memo = {g: [(r["manual"], verdicts(r, make(*g))[0]) for r in rows] for g in grid}
    chosen = {}
    for m in {r["manual"] for r in rows}:
        chosen[m] = max(grid, key=lambda g: (sum(v for k, v in memo[g] if k != m),
                                             -sum(abs(x) for x in g)))
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


def misses(rows: list[dict], n: int) -> str:
    """The linear score's misses over 300 pages where the right unit is ranked: question,
    first unit, right unit, each with its score's parts and shape."""
    out = []
    for r in rows:
        if band(r["pages"]) != "over 300 pages" or verdicts(r)[0]:
            continue
        order = ordered(r, None)
        at = next((i for i, u in enumerate(order) if u["holds"]), None)
        if at is None:
            continue
        out.append(f"## {r['id']} ({r['qkind']}): {r['question']}")
        for tag, u in (("first", order[0]), (f"right (rank {at + 1})", order[at])):
            out.append(f"- {tag}: {u['shape']} idx {u['index']} words {u['words']} "
                       f"cos {u['cos']:.3f} lex {u['lex']:.2f} hm {u['hm']:.2f} fit {u['fit']:.0f}"
                       f" | {u['heading'][-60:]} | {u['unit'][:160]!r}")
        if len(out) >= 3 * n:
            break
    return "\n".join(out)


W = (0.0, 0.05, 0.1, 0.15, 0.2)
BLEND = (0.0, 0.25, 0.5, 0.75, 1.0)
OWNER_REACH = 3  # units a line's owner may lie before or after it in its section
LONG_WORDS = 20  # a unit this long or longer gets the whole length prior


def owner_of(s, sents: list):
    """The prose or entry unit a line belongs to, the unit a quote of it would be read by: its
    entry's opening, else the nearest prose unit before it in its section, else the nearest
    after it (a synopsis line before its description), within ``OWNER_REACH`` units; None for
    a prose unit or a line with no prose near it."""
    from engine.answer.passages.unit_prior import LINE_SHAPES, shape_of

    if shape_of(s) not in LINE_SHAPES:
        return None
    by_place = {(x.doc_id, x.node_id, x.index): x for x in sents}

    def prose(index: int):
        x = by_place.get((s.doc_id, s.node_id, index))
        return x if x is not None and shape_of(x) not in LINE_SHAPES else None

    if 0 <= s.head < s.index and prose(s.head) is not None:
        return prose(s.head)
    for step in (-1, 1):
        for d in range(1, OWNER_REACH + 1):
            x = prose(s.index + step * d)
            if x is not None:
                return x
    return None


def prior_of(opening=0.0, code=0.0, label=0.0, length=0.0, owner=0.0):
    """The replay's prior, each weight added to (``owner``: blended into) the linear score
    as shipped without its code prior:

    - ``opening``: a section's first unit (its opening statement or definition);
    - ``code`` / ``label``: taken off a code line / another line (``unit_prior.shape_of``) for
      a how-to question (``unit_prior.CodePrior``, the setting's form of ``code``);
    - ``length``: times the unit's words over ``LONG_WORDS`` (at most 1);
    - ``owner``: a line's score read as ``(1 - owner) * its own + owner * its owner's``
      (``owner_of``; a line without one keeps its own)."""
    from engine.answer.passages.unit_prior import CodePrior

    def prior(row: dict, u: dict, by_order: dict) -> float:
        out = opening * (u["index"] == 0) + length * min(1.0, u["words"] / LONG_WORDS)
        out += CodePrior(code).bonus(row["qkind"], u["shape"])
        out += CodePrior(label).bonus(row["qkind"], "code" if u["shape"] == "line" else "")
        o = by_order.get(u["owner"]) if u["owner"] is not None else None
        if o is not None and owner:
            out += owner * (linear(o) - linear(u))
        return out
    return prior


def grids() -> list[tuple[str, object, list[tuple]]]:
    """(name, weights -> prior, the weights' grid) of each variant the report holds out."""
    def one(field):
        return lambda w: prior_of(**{field: w})

    return [("the section's opening", one("opening"), [(w,) for w in W]),
            ("a code line taken off for a how-to question", one("code"), [(w,) for w in W]),
            ("a code line and a label line taken off for a how-to question",
             lambda a, b: prior_of(code=a, label=b), [(a, b) for a in W for b in W]),
            ("length", one("length"), [(w,) for w in W]),
            ("a line read with its owner", one("owner"), [(w,) for w in BLEND]),
            ("all five", prior_of,
             list(itertools.product(W[:4], W[:4], W[:4], W[:4], BLEND[::2])))]


def report(rows: list[dict]) -> str:
    variants = [("linear score before (no code prior)", lambda r: verdicts(r))]
    notes = []
    for name, make, grid in grids():
        chosen = held_out(rows, make, grid)
        notes.append(f"{name}: " + ", ".join(f"{m} {'/'.join(map(str, c))}"
                                             for m, c in sorted(chosen.items())))
        variants.append((f"{name}, held out",
                         lambda r, c=chosen, mk=make: verdicts(r, mk(*c[r["manual"]]))))
        fixed = []
        for g in grid:
            big = [r for r in rows if band(r["pages"]) == "over 300 pages"]
            small = [r for r in rows if band(r["pages"]) == "under 150 pages"]
            p = make(*g)
            fixed.append(f"{'/'.join(map(str, g))}: {sum(verdicts(r, p)[0] for r in rows)}"
                         f" ({sum(verdicts(r, p)[0] for r in big)} over 300, "
                         f"{sum(verdicts(r, p)[0] for r in small)} under 150)")
        notes.append(f"{name}, fixed weights, quotes holding: " + "; ".join(fixed))
    ms = [r["score_ms"] for r in rows]
    notes.append(f"linear score: median {np.median(ms):.0f} ms a question "
                 f"(p90 {np.percentile(ms, 90):.0f})")
    return "\n\n".join([table(rows, variants), "\n".join(notes)])


def compare(rows: list[dict], other: list[dict]) -> str:
    """Two collections' rows question by question (the same probe, the windows encoded two
    ways): the quote (holds the key, begins on a gold page), the three passages (one holds it),
    the quote's text, and the recorded units' cosines."""
    by_id = {r["id"]: r for r in other}
    same_text, diffs, cos = 0, [], []
    totals = np.zeros((2, 3), int)
    for r in rows:
        o = by_id.get(r["id"])
        if o is None:
            diffs.append(f"- {r['id']}: missing from the second collection")
            continue
        a, b = verdicts(r), verdicts(o)
        totals += np.array([a, b], int)
        qa, qb = replay(ordered(r, None))[0], replay(ordered(o, None))[0]
        same_text += (qa and qa["quote"]) == (qb and qb["quote"])
        if a != b or (qa and qa["quote"]) != (qb and qb["quote"]):
            diffs.append(f"- {r['id']} ({r['manual']}): quote / page / passages {a} -> {b}; "
                         f"quote {(qa or {}).get('quote', '')[:70]!r} -> "
                         f"{(qb or {}).get('quote', '')[:70]!r}")
        units = {u["order"]: u["cos"] for u in o["units"]}
        cos += [abs(u["cos"] - units[u["order"]]) for u in r["units"] if u["order"] in units]
    n = len(rows)
    head = [f"questions {n}; the same quote text {same_text}/{n}",
            f"first: quote holds {totals[0, 0]}, page right {totals[0, 1]}, passages hold "
            f"{totals[0, 2]}; second: {totals[1, 0]}, {totals[1, 1]}, {totals[1, 2]}",
            f"units recorded in both {len(cos)}: cosine |difference| mean "
            f"{np.mean(cos) if cos else 0:.4f}, max {max(cos, default=0):.4f}"]
    return "\n".join(head + diffs)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.unit_probe")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--db", default="sqlite:///data/probe/lib.sqlite3")
    c.add_argument("--manuals", help="comma-separated manual keys (default: every manual)")
    c.add_argument("--sections", type=int, default=50)
    c.add_argument("--out", type=Path, default=Path("out/unitpick"))
    c.add_argument("--windows", choices=("fp32", "bf16", "int8"), default="fp32",
                   help="the precision the windows are encoded in (the question in float32)")
    c.add_argument("--as-stored", action="store_true",
                   help="the windows' vectors rounded to float16, as the library stores them")
    for name in ("misses", "report"):
        r = sub.add_parser(name)
        r.add_argument("--rows", type=Path, nargs="+", required=True)
        r.add_argument("--n", type=int, default=20)
    r = sub.add_parser("compare")
    r.add_argument("rows", type=Path)
    r.add_argument("against", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "collect":
        collect(a.db, a.manuals.split(",") if a.manuals else None, a.sections, a.out,
                a.windows, a.as_stored)
        return
    if a.cmd == "compare":
        print(compare(*([json.loads(x) for x in open(p)] for p in (a.rows, a.against))))
        return
    rows = list({r["id"]: r for r in (json.loads(x) for p in a.rows for x in open(p))}.values())
    print(misses(rows, a.n) if a.cmd == "misses" else report(rows))


if __name__ == "__main__":
    main()
