"""The Ask tab's parsed request: the /ask parameters in order, the engine's rules as one line per
input, and the engine's options (pure Python: no model, no database)."""
from __future__ import annotations

import gradio as gr
import pytest

from app.shared.ask_request import APP_MAX_NEW_TOKENS, AskRequest
from engine.ask import AskOptions
from engine.settings import Settings

SETTINGS = Settings()


def request(**changes) -> AskRequest:
    values = dict(doc="1", question="How do I patch a command?", mode="text", k=3, max_depth=0,
                  budget=0, gate=True, hier_pos=False, max_new_tokens=128, router="fused")
    return AskRequest(**{**values, **changes})


def test_fields_are_the_ask_api_parameters_in_order():
    # README "API": doc, question, mode, k, depth cap, node budget, gate, HDT positions,
    # max new tokens, router (which a client may leave out)
    assert AskRequest.names() == ["doc", "question", "mode", "k", "max_depth", "budget", "gate",
                                  "hier_pos", "max_new_tokens", "router"]
    nine = AskRequest("1", "q?", "text", 3, 0, 0, True, False, 128)
    assert nine.router == "fused"


def test_a_good_request_has_no_problem_and_becomes_the_engines_options():
    req = request(k=4.0, max_depth="0", budget=5, max_new_tokens="64", router=None)
    assert req.problems(SETTINGS) == {} and not req.refused(SETTINGS)
    assert req.options(SETTINGS) == AskOptions(mode="text", k=4, max_depth=None, budget=5,
                                               gate=True, hier_pos=False, max_new_tokens=64,
                                               router=SETTINGS.router)
    assert request(max_depth="", budget=None).options(SETTINGS).max_depth is None


@pytest.mark.parametrize("changes, field, words", [
    (dict(k=0), "k", "k"),
    (dict(k=""), "k", "k is missing"),
    (dict(k=2.5), "k", "whole number"),
    (dict(max_depth=-1), "max_depth", "0 (no limit) or more"),
    (dict(budget="many"), "budget", "whole number"),
    (dict(max_new_tokens=0), "max_new_tokens", f"1 to {APP_MAX_NEW_TOKENS} here"),
    (dict(max_new_tokens=APP_MAX_NEW_TOKENS + 1), "max_new_tokens", "here, not 513"),
    (dict(mode="oracle"), "mode", "oracle"),
    (dict(router="oracle"), "router", "oracle"),
])
def test_each_bad_option_is_one_line_naming_it(changes, field, words):
    req = request(**changes)
    problems = req.problems(SETTINGS)
    assert list(problems) == [field] and words in problems[field], problems
    assert req.refused(SETTINGS)
    with pytest.raises(gr.Error) as e:
        req.options(SETTINGS)
    assert e.value.message == problems[field] and "\n" not in e.value.message


def test_an_option_the_mode_does_not_use_is_checked_too():
    assert "k" in request(mode="route", k=0).problems(SETTINGS)
    assert "max_new_tokens" in request(mode="quote", max_new_tokens=0).problems(SETTINGS)


def test_the_question_is_checked_by_the_settings_limit():
    assert request(question="  ").problems(SETTINGS) == {"question": "Type a question first."}
    assert request(question=None).refused(SETTINGS)
    long = "x" * (SETTINGS.max_question_chars + 1)
    assert "the limit is 2000" in request(question=long).problems(SETTINGS)["question"]
    short = SETTINGS.with_(max_question_chars=10)
    assert request(question="a question of more than ten").refused(short)
    assert request().problems(SETTINGS) == {}
