"""Each Ask option is declared once (engine/answer/option_table.py): a toy row added to the table
is a control on the Ask and Compare tabs, a parameter of /ask and /compare, and a CLI flag, with
no other code; the engine's AskOptions is the table's fields; the MCP tool's options are rows
of the table; one app ask checks its options once."""
from __future__ import annotations

from dataclasses import fields

import gradio as gr
import pytest

from engine.answer import option_table
from engine.answer.option_table import ASK, CLI, COMPARE, OPTIONS, Option
from tests.app.test_ask_handlers import tab  # noqa: F401 (the Ask tab on a tiny runtime)

TOY = Option("toy_level", int, 2, "Toy level", "a toy option", read_by=("text",),
             on=(ASK, COMPARE, CLI), least=1)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(option_table, "OPTIONS", (*OPTIONS, TOY))
    return TOY


def test_ask_options_are_the_tables_fields_and_defaults():
    from engine.answer.options import AskOptions

    assert [(f.name, f.default) for f in fields(AskOptions)] == [
        (o.name, o.default) for o in OPTIONS]


def test_a_toy_row_is_a_cli_flag(toy):
    from engine.cli import build_parser

    args = build_parser().parse_args(["ask", "1", "q?", "--toy-level", "5"])
    assert args.toy_level == 5
    assert build_parser().parse_args(["ask", "1", "q?"]).toy_level is None  # the default


def test_a_toy_row_is_a_request_parameter_after_those_of_before(toy):
    from app.compare.compare_tab import CompareRequest
    from app.shared.ask_request import AskRequest

    assert AskRequest.names()[-2:] == ["router", "toy_level"]
    # the nine parameters of before still work; the toy takes its default
    assert AskRequest("1", "q?", "text", 3, 0, 0, True, False, 128).toy_level == 2
    assert CompareRequest.names()[-1] == "toy_level"


def test_a_toy_row_is_on_the_forms_and_in_the_api(toy, tab):
    from app.ask import ask_tab
    from app.compare import compare_tab

    s, _, _ = tab
    with gr.Blocks() as demo, gr.Tabs():
        t = ask_tab.build(s)
        c = compare_tab.build(s)
        ask_tab.wire(s, t)
        compare_tab.wire(s, c)
    control = t.inputs.toy_level
    assert isinstance(control, gr.Number) and control.label == "Toy level"
    assert control.elem_id == "ask-toy-level" and control.value == 2
    assert any(getattr(i, "elem_id", None) == "compare-toy-level" for i in c.inputs)
    api = demo.get_api_info()["named_endpoints"]
    ask = [p["parameter_name"] for p in api["/ask"]["parameters"]]
    assert ask[:10] == ["doc", "question", "mode", "k", "max_depth", "budget", "gate",
                        "hier_pos", "max_new_tokens", "router"]
    assert ask[10:] == ["toy_level"]
    assert [p["parameter_name"] for p in api["/compare"]["parameters"]][-1] == "toy_level"


def test_the_mcp_tools_options_are_rows_of_the_table():
    import inspect

    from app.server.mcp_tools import TOOL_MODES, ask_manual
    from engine.answer.option_table import option

    params = list(inspect.signature(ask_manual).parameters)[3:]  # after s, manual, question
    assert params and all(option(p) for p in params)
    assert set(TOOL_MODES) <= set(option("mode").allowed())


def test_one_app_ask_checks_its_options_once(tab, monkeypatch):
    from app.ask.ask_handlers import clear_before_ask, do_ask, validate_ask
    from app.shared.ask_request import AskRequest
    from app.shared import ask_request
    from engine.answer import options

    s, t, doc_id = tab
    options._checked.cache_clear()
    ask_request._read.cache_clear()
    runs = []
    check = options._check
    monkeypatch.setattr(options, "_check", lambda *a: runs.append(a) or check(*a))
    req = AskRequest(str(doc_id), "Which plug do I open to prime it?", "route", 2, 0, 0, True,
                     False, 8, "lexical")
    validate_ask(s, t, req)
    clear_before_ask(s, t, AskRequest(**req.values))  # each event parses its own request
    list(do_ask(s, t, AskRequest(**req.values)))
    assert len(runs) == 1
