"""bench.calibration: questions that hold their own key fact are left out, and the fit's
regularisation is chosen by leaving one manual out."""
from __future__ import annotations

import random

from bench.calibration import C_GRID, choose_c, mean_auroc
from bench.calibration_questions import informative
from engine.answer.checks.confidence import SIGNALS


def test_a_question_holding_its_own_key_fact_cannot_label_an_answer():
    sort = {"question": "Which configuration variable should I set to specify how to sort "
                        "messages?", "regex": r"(?<![\w-])sort(?![\w-])"}
    inc = {"question": "Which configuration variable should I set to control progress updates "
                       "along with $read_inc?", "regex": r"(?<![\w-])time_inc(?![\w-])"}
    assert not informative(sort) and informative(inc)
    assert informative({"question": "How do I patch a command?"})  # a probe row: no regex


def _rows(manual: str, n: int, rng: random.Random) -> list[dict]:
    """Answers whose rightness shows in one signal (key_agree) under noise in the others."""
    out = []
    for _ in range(n):
        right = rng.random() < 0.3
        signals = {s: rng.gauss(0, 1) for s in SIGNALS}
        signals["key_agree"] = float(right) + rng.gauss(0, 0.3)
        out.append({"manual": manual, "question": "q", "right": right,
                    "confidence": {"signals": signals}})
    return out


def test_the_chosen_regularisation_ranks_held_out_manuals():
    rng = random.Random(0)
    rows = [r for m in ("a", "b", "c") for r in _rows(m, 60, rng)]
    c, folds = choose_c(rows)
    assert c in C_GRID and set(folds) == {"a", "b", "c"}
    assert mean_auroc(folds) > 0.9
    assert all(f["rows"] == 60 for f in folds.values())
