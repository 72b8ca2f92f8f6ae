"""Bad option values of a question get one clear line in every mode, through the three doors a
user has: the engine (``AskOptions.validate``, run first by ``ask``), the command line (``python
-m engine ask``: ``error: ...`` on stderr, exit status 2, before anything is loaded) and the app
(tests/app/test_app_api.py, ``/ask`` and ``/compare``). Nothing is asked or stored. An option a
mode does not use (max new tokens in route and quote mode) is checked all the same."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.answer.modes import MODES
from engine.ask import MAX_NEW_TOKENS, AskError, AskOptions, ask
from engine.cli import main

ROOT = Path(__file__).resolve().parents[2]

# AskOptions field values -> the one line
BAD = [
    (dict(k=0), "k must be at least 1, not 0"),
    (dict(k=-3), "k must be at least 1, not -3"),
    (dict(k=2.5), "k must be a whole number, not 2.5"),
    (dict(max_depth=0), "the depth cap must be at least 1, not 0"),
    (dict(max_depth=-1), "the depth cap must be at least 1, not -1"),
    (dict(budget=0), "the node budget must be at least 1, not 0"),
    (dict(max_new_tokens=0), f"max new tokens must be 1 to {MAX_NEW_TOKENS}, not 0"),
    (dict(max_new_tokens=-1), f"max new tokens must be 1 to {MAX_NEW_TOKENS}, not -1"),
    (dict(max_new_tokens=10**9), f"max new tokens must be 1 to {MAX_NEW_TOKENS}, not 1000000000"),
    (dict(max_new_tokens=True), "max new tokens must be a whole number, not True"),
    (dict(text_budget=0), "the text budget must be at least 1 token, not 0"),
    (dict(temperature=0.0), "the temperature must be a positive number, not 0.0"),
    (dict(temperature=float("nan")), "the temperature must be a positive number, not nan"),
    (dict(walk="sideways"), "unknown walk 'sideways'; choose one of leaf-rescue, rescue, leaf, "
                            "topk"),
    (dict(router="oracle"), "unknown router 'oracle'; choose one of fused, memory, lexical, "
                            "dense"),
    (dict(copy_names="yes"), "copy_names must be true or false, not 'yes'"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("field, line", BAD)
def test_every_bad_value_is_one_line_in_every_mode(mode, field, line):
    with pytest.raises(AskError) as e:
        AskOptions(mode=mode, **field).validate()
    assert str(e.value) == line


def test_good_values_pass_in_every_mode():
    for mode in MODES:
        AskOptions(mode=mode).validate()
        AskOptions(mode=mode, k=1, max_depth=1, budget=1, max_new_tokens=MAX_NEW_TOKENS,
                   walk="topk").validate()
    import numpy as np  # a bench's numpy integers are whole numbers too

    AskOptions(k=np.int64(2), max_new_tokens=np.int32(16)).validate()


def test_unknown_mode():
    with pytest.raises(AskError, match="unknown mode 'telepathy'; choose one of"):
        AskOptions(mode="telepathy").validate()


def test_ask_refuses_before_routing_and_logs_nothing(tiny_backbone, tiny_parts, tmp_path):
    from engine.ingest import ingest_file
    from engine.runtime import Runtime
    from engine.settings import Settings
    from storage import Library

    settings = Settings(data_dir=tmp_path)
    rt = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    try:
        md = tmp_path / "valve.md"
        md.write_text("# Valve\n\n## Bleeding\n\nTurn the bleed screw a quarter turn.\n")
        doc = ingest_file(md, rt, memories=False).doc_id
        for mode in ("route", "quote", "text"):
            with pytest.raises(AskError, match="max new tokens must be 1 to"):
                ask(rt, doc, "How do I bleed it?", AskOptions(mode=mode, max_new_tokens=0))
            with pytest.raises(AskError, match="k must be at least 1"):
                ask(rt, doc, "How do I bleed it?", AskOptions(mode=mode, k=0))
        assert rt.library.list_queries(doc) == []
        ask(rt, doc, "How do I bleed it?", AskOptions(mode="route"))  # a good one is logged
        assert len(rt.library.list_queries(doc)) == 1
    finally:
        rt.library.close()


CLI_BAD = [
    (["--mode", "route", "--max-new-tokens", "0"],
     f"max new tokens must be 1 to {MAX_NEW_TOKENS}, not 0"),
    (["--mode", "quote", "--max-new-tokens", "99999"],
     f"max new tokens must be 1 to {MAX_NEW_TOKENS}, not 99999"),
    (["--mode", "route", "--k", "0"], "k must be at least 1, not 0"),
    (["--mode", "quote", "--max-depth", "-1"], "the depth cap must be at least 1, not -1"),
    (["--mode", "route", "--budget", "0"], "the node budget must be at least 1, not 0"),
    (["--mode", "text", "--text-budget", "0"], "the text budget must be at least 1 token, not 0"),
    (["--mode", "telepathy"], "argument --mode: invalid choice: 'telepathy'"),
    (["--router", "oracle"], "argument --router: invalid choice: 'oracle'"),
    (["--k", "three"], "argument --k: invalid int value: 'three'"),
]


@pytest.mark.parametrize("args, line", CLI_BAD)
def test_cli_bad_option_is_one_line_and_stores_nothing(args, line, tmp_path, capsys,
                                                       monkeypatch):
    monkeypatch.setenv("H2MT_DATA_DIR", str(tmp_path))
    try:
        rc = main(["ask", "1", "How do I bleed it?", *args])
    except SystemExit as e:  # argparse's own refusals exit
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and line in err, err
    assert list(tmp_path.iterdir()) == []  # nothing loaded, nothing stored


def test_cli_bad_option_in_a_real_process():
    proc = subprocess.run([sys.executable, "-m", "engine", "ask", "1", "q", "--mode", "route",
                           "--max-new-tokens", "0", "--db", "sqlite:////proc/no-such-dir/x.db"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == f"error: max new tokens must be 1 to {MAX_NEW_TOKENS}, not 0\n"
