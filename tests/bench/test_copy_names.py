"""The copy-decoding comparison (bench.copy_names) on hand-made probe rows, and the probe's
``--option`` pairs."""
from __future__ import annotations

import json

import pytest

from bench.copy_names import read_rows, table
from bench.probe import ask_options


def row(qid: str, question: str, holds: bool, short: str | None = None,
        short_holds: bool = False) -> dict:
    return {"id": qid, "mode": "text", "question": question, "key": "k", "answer": "a",
            "verdict": {"answer_holds": holds, "passages_hold": True},
            "short_answer": short, "short_answer_holds": short_holds}


def test_the_table_counts_the_name_questions_apart(tmp_path):
    free = [row("a", "How do I patch a command?", False, "\\patchcmd", True),
            row("b", "Which option sets the width?", True),
            row("c", "What is etoolbox?", True)]
    copy = [row("a", "How do I patch a command?", True), row("b", "Which option sets it?", True),
            row("c", "What is etoolbox?", True)]
    paths = []
    for name, rows in (("free", free), ("copy", copy)):
        paths.append(tmp_path / f"{name}.jsonl")
        paths[-1].write_text("\n".join(json.dumps(r) for r in rows))
    lines = table(read_rows(paths[0]), read_rows(paths[1])).splitlines()
    assert lines[2] == "| name questions | 2 | 1/2 | 2/2 | 1/2 (1 given) | 2/2 |"
    assert lines[3] == "| other questions (not constrained) | 1 | 1/1 | 1/1 | 0/1 (0 given) | 1/1 |"


def test_probe_options_are_ask_options_read_as_json():
    assert ask_options(["copy_names=true", "k=4", "router=lexical"]) == {
        "copy_names": True, "k": 4, "router": "lexical"}
    with pytest.raises(SystemExit, match="no Ask option 'copy'"):
        ask_options(["copy=true"])
