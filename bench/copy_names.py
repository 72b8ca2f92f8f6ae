"""Copy-constrained decoding against default decoding and the short answer, on the dev probe's
name questions (issue 55; ``AskOptions.copy_names``).

    H2MT_SHORT_ANSWER=auto python -m bench.probe --modes text --out out/free ...
    H2MT_SHORT_ANSWER=auto python -m bench.probe --modes text --option copy_names=true --out out/copy ...
    python -m bench.copy_names --free out/free/rows.jsonl --copy out/copy/rows.jsonl

A name question is one the answer-type classifier gives a type of
``engine.answer.passages.answer_type.NAME_TYPES`` (the questions the option constrains). For
them it counts: the answer shown holds the key with each decoding, the short answer holds it
(``H2MT_SHORT_ANSWER=auto``: the row's ``short_answer``; none given counts as not), and the
passages shown hold it (what any copy can reach). Then each name question's two answers.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from engine.answer.passages.answer_type import NAME_TYPES, question_type


def read_rows(path: Path) -> dict[str, dict]:
    """A probe's text-mode rows by question id."""
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return {r["id"]: r for r in rows if r["mode"] == "text"}


def name_ids(rows: dict[str, dict]) -> list[str]:
    return [i for i, r in rows.items() if question_type(r["question"]) in NAME_TYPES]


def table(free: dict[str, dict], copy: dict[str, dict]) -> str:
    """The counts over the name questions both runs asked, and over the other questions."""
    both = [i for i in free if i in copy]
    names = [i for i in name_ids(free) if i in copy]
    others = [i for i in both if i not in names]
    lines = ["| questions | n | default decoding | copy-constrained | short answer alone "
             "| passages hold |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for label, ids in (("name questions", names), ("other questions (not constrained)", others)):
        n = len(ids)

        def count(rows, key):
            return f"{sum(bool(rows[i]['verdict'][key]) for i in ids)}/{n}"
        shorts = f"{sum(bool(free[i].get('short_answer_holds')) for i in ids)}/{n}"
        given = sum(free[i].get("short_answer") is not None for i in ids)
        lines.append(f"| {label} | {n} | {count(free, 'answer_holds')} | "
                     f"{count(copy, 'answer_holds')} | {shorts} ({given} given) | "
                     f"{count(free, 'passages_hold')} |")
    return "\n".join(lines)


def examples(free: dict[str, dict], copy: dict[str, dict]) -> str:
    out = []
    for i in (i for i in name_ids(free) if i in copy):
        f, c = free[i], copy[i]
        mark = lambda r: "H" if r["verdict"]["answer_holds"] else "x"  # noqa: E731
        out.append(f"{i} ({question_type(f['question'])}) {f['question']}  /{f['key']}/\n"
                   f"  default [{mark(f)}]: {' '.join(f['answer'].split())[:160]}\n"
                   f"  copy    [{mark(c)}]: {' '.join(c['answer'].split())[:160]}\n"
                   f"  short answer: {f.get('short_answer')}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--free", type=Path, required=True, help="rows.jsonl of default decoding")
    ap.add_argument("--copy", type=Path, required=True, help="rows.jsonl with copy_names=true")
    args = ap.parse_args(argv)
    free, copy = read_rows(args.free), read_rows(args.copy)
    print(table(free, copy) + "\n\n" + examples(free, copy))


if __name__ == "__main__":
    main()
