"""The answer check's verdict (engine.answer.checks.verdict): the fold line says why in words, from the
signal that pulls the confidence down most; the shipped model reads every signal."""
from __future__ import annotations

import numpy as np

from engine.answer.checks.check import check_answer
from engine.answer.checks.confidence import SIGNALS, Confidence, repetition
from engine.answer.checks.key_line import KeyLine
from engine.answer.checks.verdict import Said, judge, reason
from engine.answer.question import Question

QUOTE = "-T number\n--tabsize= number\nSet the displayed tab length to number columns."


def model(weights: dict[str, float], threshold: float = 0.5) -> Confidence:
    """A model whose score rests on ``weights`` (standardised signals around 0.5)."""
    coef = np.array([weights.get(n, 0.0) for n in SIGNALS])
    return Confidence(SIGNALS, np.full(len(SIGNALS), 0.5), np.ones(len(SIGNALS)), coef, 0.0,
                      threshold)


def signals(**changes) -> dict[str, float]:
    return {**dict.fromkeys(SIGNALS, 0.5), **changes}


def test_an_option_the_passage_does_not_give_is_named_in_the_line():
    answer = "Use the --tabwidth option."
    line = reason("quote_agree", Said(Question.read("Which option sets the tab width?"), answer,
                                     None, None, QUOTE))
    assert line == ("The answer names an option (--tabwidth) that the quoted passage does not "
                    "give.")


def test_a_which_option_question_answered_without_an_option():
    line = reason("type_miss", Said(Question.read("Which option sets the tab width?"),
                                    "Set it in the settings.", None, None, QUOTE))
    assert line == "The question asks for an option, and the answer names none."


def test_the_key_lines_term_missing_from_the_answer():
    key = KeyLine("--tabsize= number", 12, "Options", "--tabsize", True)
    line = reason("key_agree", Said(Question.read("Which option sets the tab width?"), "Use -x.",
                                   None, key, QUOTE))
    assert line == ("The answer does not give --tabsize, which the manual's line for this "
                    "question gives.")


def test_the_checks_own_line_is_kept_for_its_signals():
    check = check_answer("Use --frob.", [QUOTE], Question.read("Which option?"))
    assert reason("unsupported", Said(Question.read("Which option?"), "Use --frob.", check, None,
                                      QUOTE)) == check.line


def test_judge_folds_below_the_threshold_with_the_weakest_signals_line():
    m = model({"type_miss": -2.0, "sim_mean": 1.0})
    asked = Question.read("Which option sets the tab width?")
    low = judge(m, signals(type_miss=1.0), Said(asked, "Set it.", None, None, QUOTE))
    assert low.low and low.weakest == "type_miss" and "asks for an option" in low.reason
    high = judge(m, signals(type_miss=0.0, sim_mean=0.9), Said(asked, "Use -T.", None, None, QUOTE))
    assert not high.low and high.reason is None and high.score > low.score
    assert judge(None, signals(), Said(Question.read("q"), "a")).score is None


def test_the_flag_folds_only_where_there_is_no_score():
    """Issue 67: with a fitted model the rule check's flag is a signal, not a fold of its own
    (it folded right answers); without a score the flag still folds."""
    from engine.answer.checks.verdict import folds

    flagged = check_answer("Use --frob.", [QUOTE], Question.read("Which option?"))
    assert flagged.flagged
    m, said = model({"sim_mean": 1.0}), Said(Question.read("Which option?"), "Use --frob.",
                                              flagged, None, QUOTE)
    sure = judge(m, signals(sim_mean=0.9), said)
    doubt = judge(m, signals(sim_mean=0.1), said)
    assert not folds(flagged, sure) and folds(flagged, doubt)
    unscored = judge(None, signals(), said)
    assert folds(flagged, unscored) and folds(flagged, None)
    unflagged = check_answer("Use -T.", [QUOTE], Question.read("?"))
    assert not folds(None, None) and not folds(unflagged, None)


def test_repetition_counts_repeated_word_trigrams():
    assert repetition("use the tab key") == 0.0
    assert repetition("use the tab use the tab use the tab") > 0.5


def test_a_reader_without_log_probabilities_gets_the_documented_default():
    """A served reader returns no log-probabilities: the signals say so and take the default
    the shipped model was fitted with (bench.calibration fits on copies without them)."""
    from engine.answer.checks.confidence import LOGPROB_DEFAULT, Reading, answer_signals

    answer = "Use --tabsize."
    check = check_answer(answer, [QUOTE], Question.read("Which option sets the tab width?"), QUOTE)
    asked = Question.read("Which option sets the tab width?")
    s = answer_signals(answer, Reading(asked, [QUOTE], QUOTE, 1.1, None, "eos", 0.2), None,
                       check)
    assert (s["lp_mean"], s["lp_min"], s["lp_known"]) == (*LOGPROB_DEFAULT, 0.0)
    assert s["type_miss"] == 0.0 and s["key_agree"] == 0.5 and set(s) == set(SIGNALS)
    given = answer_signals(answer, Reading(asked, [QUOTE], QUOTE, 1.1, [-0.1, -2.0], "eos", 0.2),
                           None, check)
    assert (given["lp_mean"], given["lp_min"], given["lp_known"]) == (-1.05, -2.0, 1.0)


def test_a_reader_the_check_has_no_fit_for_says_so_in_one_line():
    from types import SimpleNamespace

    from engine.answer.checks.confidence import ASSET
    from engine.answer.checks.verdict import unfitted_reader
    from engine.settings import Settings

    shipped = Confidence.load(ASSET)
    bundled = SimpleNamespace(label="smollm2 (in this process)")
    assert shipped.reader == "smollm2"
    assert unfitted_reader(shipped, Settings(), bundled) is None
    assert unfitted_reader(None, Settings(), bundled) is None  # no check: nothing to say
    served = Settings(reader="http://localhost:8000/v1", reader_model="qwen2.5-7b")
    label = SimpleNamespace(label="qwen2.5-7b at http://localhost:8000/v1")
    line = unfitted_reader(shipped, served, label)
    assert line == ("The answer check has no fit for the reader qwen2.5-7b at "
                    "http://localhost:8000/v1, so its answer is shown without the check's "
                    "confidence: only the check's rules can fold it.")
    fitted = Confidence(shipped.names, shipped.mean, shipped.scale, shipped.coef,
                        shipped.intercept, shipped.threshold, reader="qwen2.5-7b")
    assert unfitted_reader(fitted, served, label) is None  # a fit of its own
