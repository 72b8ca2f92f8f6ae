"""bench.shown_fit: what the screen states, counted per question (issue 67's two figures), and
the threshold chosen as the lowest that keeps wrong answers shown unmarked under the target."""
from __future__ import annotations

import numpy as np

from bench.shown_fit import TARGETS, choose_threshold, probe_answers, screen


def _row(id_, right, key=False, key_hit=False, key_agree=False, fault=None, flagged=False):
    sig = {"key_agree": 1.0 if key_agree else 0.0}
    return {"id": id_, "manual": "m", "mode": "text", "question": "?", "not_covered": False,
            "verdict": {"answer_holds": right}, "key_line_term": key, "key_line_holds": key_hit,
            "folded": False,
            "calibration": {"confidence": {"signals": sig}, "form": {"fault": fault},
                            "degenerate": False, "check": {"flagged": flagged}}}


def test_the_screen_counts_a_wrong_answer_or_a_wrong_key_line_once_per_question():
    rows = probe_answers([
        _row("a", True, key=True, key_hit=True, key_agree=True),  # right, its key line right
        _row("b", False, key=True, key_hit=False, key_agree=True),  # wrong, a wrong key line
        _row("c", False, key=True, key_hit=False),  # wrong answer; the key line not named
        _row("d", True, fault="cut"),  # right, folded by its form whatever the score
        _row("e", False, flagged=True),  # flagged: a signal, no fold of its own
    ])
    s = np.array([0.9, 0.9, 0.2, 0.9, 0.9])
    f = screen(rows, s, 0.5, "term+answer")
    assert (f["wrong_unmarked"], f["right_folded"], f["right"]) == (2, 1, 2)  # b and e; d
    assert (f["key_lines"], f["key_lines_wrong"]) == (2, 1)  # a's and b's; c's answer folded
    before = screen(rows, s, 0.5, "term")  # the key line whatever the answer: c's shows too
    assert before["wrong_unmarked"] == 3 and before["key_lines"] == 3
    flag = probe_answers([_row("e", False, flagged=True)], flag_folds=True)
    assert flag[0]["ruled"] and screen(flag, np.array([0.9]), 0.5, "none")["wrong_unmarked"] == 0


def test_the_threshold_is_the_lowest_under_the_target():
    rows = probe_answers([_row(str(i), i % 5 == 0) for i in range(40)])
    s = np.linspace(0.0, 1.0, 40)
    t = choose_threshold(rows, s, "none")
    assert screen(rows, s, t, "none")["wrong_share"] <= TARGETS[0]
    lower = max(x for x in s if x < t)
    assert screen(rows, s, lower, "none")["wrong_share"] > TARGETS[0]
