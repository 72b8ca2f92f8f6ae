"""The practical dev probe: questions a new user asks, on small and large manuals, judged by the
key fact (issue 42).

    python -m bench.probe [--manuals LIST] [--modes quote,text] [--limit N] [--out DIR]
                          [--db URL] [--check-only] [--from-rows ROWS]

Every manual of bench/probe/manuals.json is ingested with the product's own ingest (phase one:
tree and routing evidence, as ``python -m engine ingest --text-only`` does; bench.qa's
``ingest_documents``) into one database (default data/probe/lib.sqlite3, reused across runs),
then every question of bench/probe/questions.jsonl is asked in each mode with the product's
default options (``AskOptions(mode=...)``). ``bench.probe_set.judge`` scores each answer: the
quote holds the key fact (its regex), the quote begins on a gold page, the answer shown holds
the fact, a wrong answer shown unmarked (no flag, no fold, not "not covered"), a right answer
flagged or folded. The summary gives these per mode, per manual and per size bucket (under 150
pages, 150-400, over 400); every row (question, quote, its page, answer, the check, a route
summary, timings) goes to OUT/rows.jsonl, the tables to OUT/summary.md. A generated answer's
row also carries ``calibration`` (the answer check's signals, confidence, fold line and key line,
labelled by the key fact: ``bench.calibration.calibration_fields``), and the run ends with the
confidence's AUROC and risk-coverage curve (``bench.calibration.report``).

--check-only checks the question file instead (every regex compiles and matches the text of
each of its gold pages) and exits non-zero on a failure.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

from bench.calibration import calibration_fields, report_probe
from bench.metrics import mean, median
from bench.probe_set import (BUCKETS, DATA_DIR, QUESTIONS_FILE, Manual, ProbeAnswer,
                             ProbeQuestion, holds, judge, key_on_pages, load_manuals, load_questions,
                             manual_pdf)

MODES = ("quote", "text")
ROUTE_TITLES = 5  # selected sections named in a row's route summary


def answer_of(ans) -> ProbeAnswer:
    """The plain data ``judge`` reads, from an engine Answer."""
    from engine.answer.passages.evidence import strip_cut_marker

    quote = ans.quote
    return ProbeAnswer(text=strip_cut_marker(ans.text or ""),
                       quote=quote.text if quote is not None else None,
                       quote_page=quote.page if quote is not None else None,
                       flagged=ans.check.flagged if ans.check is not None else None,
                       folded=ans.folded if ans.check is not None else None,
                       not_covered=ans.not_covered)


def route_summary(ans, q: ProbeQuestion) -> dict:
    """The routing in brief: router, sections selected (the first few by title and pages) and
    whether one of them spans a gold page; the quote's section."""
    route = ans.route
    if route is None:
        return {}
    nodes = [route.nodes[i] for i in route.selected]
    gold = set(q.pages)
    return {"router": route.router, "selected": len(nodes), "scored": route.scored,
            "gold_page_selected": any(n.page_start is not None and n.page_end is not None
                                      and any(n.page_start <= p <= n.page_end for p in gold)
                                      for n in nodes) if gold else None,
            "titles": [[n.title, n.page_start, n.page_end] for n in nodes[:ROUTE_TITLES]],
            "quote_heading": ans.quote.heading if ans.quote is not None else None,
            "quote_node": ans.quote.node_id if ans.quote is not None else None}


def ask_row(rt, doc_id: int, q: ProbeQuestion, m: Manual, mode: str) -> dict:
    """Ask one question in one mode with the product's defaults; the row with its verdicts."""
    from engine.ask import AskOptions, ask

    t0 = time.perf_counter()
    ans = ask(rt, doc_id, q.question, AskOptions(mode=mode), log=False)
    wall = (time.perf_counter() - t0) * 1e3
    a = answer_of(ans)
    met = ans.metrics
    check = ans.check.as_json() if ans.check is not None else None
    return {"id": q.id, "manual": q.manual, "bucket": m.bucket, "pages": m.pages,
            "kind": q.kind, "mode": mode, "question": q.question, "key": q.key,
            "gold_pages": list(q.pages), "quote": a.quote, "quote_page": a.quote_page,
            "quote_score": ans.quote.score if ans.quote is not None else None,
            "answer": a.text, "not_covered": a.not_covered, "flagged": a.flagged,
            "folded": a.folded, "check": check, "degenerate": ans.degenerate,
            "cut": ans.cut, "verdict": asdict(judge(q, a)), "route": route_summary(ans, q),
            "timings_ms": {"wall": wall, "total": met.total_ms, "route": met.route_ms,
                           "quote": met.quote_ms, "ttft": met.ttft_ms if mode != "quote" else None,
                           "evidence": met.evidence_ms},
            "generated_tokens": met.generated_tokens,
            # the answer check's signals, confidence and key line, labelled by the key fact
            # (bench.calibration reads these rows: the fold threshold, the risk-coverage curve)
            "calibration": calibration_fields(ans, lambda t: holds(q, t))
            if ans.verdict is not None else None}


# -- summary -------------------------------------------------------------------------------------

COLUMNS = (("quote holds", "quote_holds"), ("quote page", "quote_page"),
           ("answer holds", "answer_holds"), ("wrong unmarked", "wrong_unmarked"),
           ("right flagged", "right_flagged"), ("fragment quotes", "quote_fragment"))


def rates(rows: list[dict]) -> dict:
    """Counts and shares of each verdict over ``rows`` (a verdict that is None is left out)."""
    out = {"n": len(rows)}
    for _, key in COLUMNS:
        judged = [r["verdict"][key] for r in rows if r["verdict"][key] is not None]
        out[key] = (sum(judged), len(judged))
    out["median_ms"] = median(r["timings_ms"]["wall"] for r in rows)
    out["route_gold"] = mean(float(r["route"]["gold_page_selected"]) for r in rows
                             if r["route"].get("gold_page_selected") is not None)
    return out


def _cell(x: tuple[int, int]) -> str:
    got, n = x
    return f"{got}/{n} ({100 * got / n:.0f}%)" if n else "-"


def summary_table(rows: list[dict], group: str, manuals: dict[str, Manual]) -> str:
    """One line per mode and group value ("manual" or "bucket"), then each mode's total."""
    order = ([m for m in manuals] if group == "manual" else [b for b, _ in BUCKETS])
    head = ("| mode | " + group + " | questions | " + " | ".join(c for c, _ in COLUMNS)
            + " | gold page routed | median ms |")
    lines = [head, "| --- | --- | ---: | " + " | ".join("---:" for _ in COLUMNS) + " | ---: | ---: |"]
    for mode in [m for m in MODES if any(r["mode"] == m for r in rows)]:
        mrows = [r for r in rows if r["mode"] == mode]
        groups = [(g, [r for r in mrows if r[group] == g]) for g in order]
        for g, rs in groups + [("all", mrows)]:
            if not rs:
                continue
            s = rates(rs)
            label = f"**{g}**" if g == "all" else g
            if group == "manual" and g != "all":
                label += f" ({manuals[g].pages} p.)"
            routed = "-" if s["route_gold"] is None else f"{100 * s['route_gold']:.0f}%"
            lines.append(f"| {mode} | {label} | {s['n']} | "
                         + " | ".join(_cell(s[k]) for _, k in COLUMNS)
                         + f" | {routed} | {s['median_ms']:.0f} |")
    return "\n".join(lines)


def summary(rows: list[dict], manuals: dict[str, Manual]) -> str:
    return ("### By manual\n\n" + summary_table(rows, "manual", manuals)
            + "\n\n### By size\n\n" + summary_table(rows, "bucket", manuals))


# -- main ----------------------------------------------------------------------------------------

def check_questions(questions: list[ProbeQuestion], manuals: dict[str, Manual]) -> list[str]:
    """One line per gold page whose text the key's regex does not match."""
    bad = []
    pdfs = {m: manual_pdf(manuals[m]) for m in {q.manual for q in questions}}
    for q in questions:
        pdf = pdfs[q.manual]
        bad += [f"{q.id}: /{q.key}/ not on page {p} of {pdf.name}"
                for p, ok in key_on_pages(q, pdf).items() if not ok]
    return bad


def pick(questions: list[ProbeQuestion], manuals: list[str] | None, limit: int | None
         ) -> list[ProbeQuestion]:
    """The questions of the chosen manuals, at most ``limit`` per manual (file order)."""
    taken: dict[str, int] = defaultdict(int)
    out = []
    for q in questions:
        if manuals and q.manual not in manuals:
            continue
        if limit is not None and taken[q.manual] >= limit:
            continue
        taken[q.manual] += 1
        out.append(q)
    return out


def round_robin(questions: list[ProbeQuestion]) -> list[ProbeQuestion]:
    """One question of each manual in turn (file order within a manual): a run cut short has
    asked every manual alike."""
    by: dict[str, list[ProbeQuestion]] = defaultdict(list)
    for q in questions:
        by[q.manual].append(q)
    width = max((len(v) for v in by.values()), default=0)
    return [v[i] for i in range(width) for v in by.values() if i < len(v)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=Path, default=QUESTIONS_FILE)
    ap.add_argument("--manuals", default=None, help="comma-separated manual keys (default all)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated: quote,text")
    ap.add_argument("--limit", type=int, default=None, help="questions per manual")
    ap.add_argument("--out", type=Path, default=Path("out/probe"))
    ap.add_argument("--db", default=None,
                    help=f"database URL (default: sqlite:///{DATA_DIR}/lib.sqlite3, reused)")
    ap.add_argument("--check-only", action="store_true",
                    help="only check that every key's regex matches its gold pages")
    ap.add_argument("--from-rows", type=Path, default=None,
                    help="only summarise an existing rows.jsonl (e.g. of an interrupted run)")
    args = ap.parse_args(argv)
    manuals = load_manuals()
    if args.from_rows:
        rows = [json.loads(x) for x in args.from_rows.read_text().splitlines() if x.strip()]
        print(f"(from {args.from_rows}: {len(rows)} rows)\n\n{summary(rows, manuals)}")
        return
    try:
        questions = load_questions(args.questions, manuals)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    chosen = [m for m in (args.manuals or "").split(",") if m]
    unknown = [m for m in chosen if m not in manuals]
    modes = [m for m in args.modes.split(",") if m]
    if unknown or any(m not in MODES for m in modes):
        raise SystemExit(f"error: manuals are {', '.join(manuals)}; modes {', '.join(MODES)}")
    questions = round_robin(pick(questions, chosen, args.limit))
    if args.check_only:
        bad = check_questions(questions, manuals)
        print("\n".join(bad) or f"{len(questions)} questions: every key matches its gold pages")
        raise SystemExit(1 if bad else 0)

    from bench.qa import ingest_documents
    from engine.runtime import Runtime
    from engine.settings import Settings, SettingsError

    DATA_DIR.mkdir(parents=True, exist_ok=True)
    try:
        settings = Settings.from_env(db_url=args.db or f"sqlite:///{DATA_DIR / 'lib.sqlite3'}")
    except SettingsError as e:
        raise SystemExit(f"error: {e}") from None
    t_start = time.perf_counter()
    rt = Runtime.load(settings)
    used = sorted({q.manual for q in questions}, key=list(manuals).index)
    doc_ids = ingest_documents(rt, {m: manual_pdf(manuals[m]) for m in used}, no_ingest=False,
                               memories=False)
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    with open(args.out / "rows.jsonl", "w") as f:
        for mode in modes:  # all quotes first: the cheap mode's figures come early
            for i, q in enumerate(questions, 1):
                row = ask_row(rt, doc_ids[q.manual], q, manuals[q.manual], mode)
                rows.append(row)
                f.write(json.dumps(row) + "\n")
                f.flush()
                v = row["verdict"]
                print(f"[{mode} {i}/{len(questions)}] {q.id} quote {'H' if v['quote_holds'] else 'x'}"
                      f" page {'H' if v['quote_page'] else 'x'} answer "
                      f"{'H' if v['answer_holds'] else 'x'}{' marked' if v['marked'] else ''} "
                      f"{row['timings_ms']['wall']:.0f} ms", flush=True)
    md = ["# The practical dev probe", "",
          f"- command: `python -m bench.probe {' '.join(sys.argv[1:] if argv is None else argv)}`",
          f"- {len(questions)} questions, modes {', '.join(modes)}; documents ingested phase one "
          "only (tree and routing evidence, no memories: the fused router without its memory "
          f"channel); wall time {time.perf_counter() - t_start:.0f} s", "", summary(rows, manuals)]
    (args.out / "summary.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    report_probe(rows)  # the answer check's AUROC and risk-coverage curve (bench.calibration)


if __name__ == "__main__":
    main()
