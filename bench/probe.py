"""The practical dev probe: questions a new user asks, on small and large manuals, judged by the
key fact (issue 42).

    python -m bench.probe [--manuals LIST] [--modes quote,text] [--limit N] [--out DIR]
                          [--db URL] [--option NAME=VALUE] [--check-only] [--from-rows ROWS]
                          [--resume]

Every manual of bench/probe/manuals.json is ingested with the product's own ingest (phase one:
tree and routing evidence, as ``python -m engine ingest --text-only`` does; bench.qa's
``ingest_documents``) into one database (default data/probe/lib.sqlite3, reused across runs),
then every question of bench/probe/questions.jsonl is asked in each mode with the product's
default options (``AskOptions(mode=...)``; ``--option`` sets one, e.g. copy_names=true).
``engine.answer.evaluation.judge`` scores each answer: the quote holds the key fact (its
regex), the quote begins on a gold page, the answer shown holds the fact, a wrong answer shown
unmarked (no flag, no fold, not "not covered"), a right answer flagged or folded. The summary
gives these per mode, per manual and per size bucket (under 150 pages, 150-400, over 400);
every row (question, quote, its page, answer, the check, a route summary, timings, the short
answer) goes to OUT/rows.jsonl, the tables to OUT/summary.md. A generated answer's row also
carries ``calibration`` (the answer check's signals, confidence, fold line and key line,
labelled by the key fact: ``bench.calibration.calibration_fields``), and the run ends with the
confidence's AUROC and risk-coverage curve (``bench.calibration.report``). --resume keeps the
rows already in OUT/rows.jsonl and asks only the (question, mode) pairs it lacks, so a run cut
short goes on where it stopped.

--check-only checks the question file instead (every regex compiles and matches the text of
each of its gold pages) and exits non-zero on a failure.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

from bench.calibration import calibration_fields, report_probe
from bench.probe_set import (BUCKETS, DATA_DIR, QUESTIONS_FILE, Manual, ProbeQuestion, holds,
                             key_on_pages, load_manuals, load_questions, manual_pdf)
from engine.answer.evaluation import COLUMNS, rates  # noqa: F401 (rates: the tests')

MODES = ("quote", "text")


def ask_row(rt, doc_id: int, q: ProbeQuestion, m: Manual, mode: str,
            options: dict | None = None) -> dict:
    """Ask one question in one mode with the product's defaults (``options`` set on them); the
    row with its verdicts (engine.ask.evaluate, the app's Evaluation tab's code too) and the
    manual's size."""
    from engine.ask import evaluate

    ev = evaluate(rt, doc_id, q, mode, options)
    # the answer check's signals, confidence and key line, labelled by the key fact
    # (bench.calibration reads these rows: the fold threshold, the risk-coverage curve)
    calibration = (calibration_fields(ev.answer, lambda t: holds(q, t))
                   if ev.answer.verdict is not None else None)
    return {**ev.row, "bucket": m.bucket, "pages": m.pages, "calibration": calibration}


# -- summary -------------------------------------------------------------------------------------

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


def ask_options(pairs: list[str]) -> dict:
    """``--option NAME=VALUE`` pairs as Ask options (VALUE as JSON: true, 3, null; else a
    string); SystemExit for a name AskOptions has not."""
    from dataclasses import fields

    from engine.answer.options import AskOptions

    names, out = {f.name for f in fields(AskOptions)}, {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if name not in names:
            raise SystemExit(f"error: no Ask option {name!r}")
        try:
            out[name] = json.loads(value)
        except json.JSONDecodeError:
            out[name] = value
    return out


def kept_rows(path: Path, questions: list[ProbeQuestion], modes: list[str]) -> list[dict]:
    """The rows of an earlier run in ``path`` that a resumed run keeps: those of the chosen
    questions and modes (a line cut by a kill is dropped and the file rewritten without it)."""
    if not path.exists():
        return []
    wanted = {(q.id, m) for q in questions for m in modes}
    rows = []
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue  # the last line of a killed run
        if (r.get("id"), r.get("mode")) in wanted:
            rows.append(r)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"resuming: {len(rows)} rows kept from {path}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=Path, default=QUESTIONS_FILE)
    ap.add_argument("--manuals", default=None, help="comma-separated manual keys (default all)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated: quote,text")
    ap.add_argument("--limit", type=int, default=None, help="questions per manual")
    ap.add_argument("--out", type=Path, default=Path("out/probe"))
    ap.add_argument("--db", default=None,
                    help=f"database URL (default: sqlite:///{DATA_DIR}/lib.sqlite3, reused)")
    ap.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                    help="an Ask option set for every question (VALUE read as JSON, else as a "
                         "string), e.g. copy_names=true; repeatable")
    ap.add_argument("--check-only", action="store_true",
                    help="only check that every key's regex matches its gold pages")
    ap.add_argument("--from-rows", type=Path, default=None,
                    help="only summarise an existing rows.jsonl (e.g. of an interrupted run)")
    ap.add_argument("--resume", action="store_true",
                    help="keep OUT/rows.jsonl's rows and ask only the questions it lacks")
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
    options = ask_options(args.option)
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
    rows = kept_rows(args.out / "rows.jsonl", questions, modes) if args.resume else []
    done = {(r["id"], r["mode"]) for r in rows}
    with open(args.out / "rows.jsonl", "a" if args.resume else "w") as f:
        for mode in modes:  # all quotes first: the cheap mode's figures come early
            for i, q in enumerate(questions, 1):
                if (q.id, mode) in done:
                    continue
                row = ask_row(rt, doc_ids[q.manual], q, manuals[q.manual], mode, options)
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
