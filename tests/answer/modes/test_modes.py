"""engine.answer.modes: the table of modes, and one class in one file is a whole new mode (a toy
mode defined here answers through ask_stream, checked, routed, streamed and logged)."""
from __future__ import annotations

import pytest

from engine.answer.generation.reader import InProcessReader
from engine.answer.events import AnswerReady, RouteReady, TokenChunk
from engine.answer.modes import MODES, Mode, Step, register
from engine.answer.request import Request
from engine.answer.generation.prompts import text_plan
from engine.ask import AskError, AskOptions, ask_stream


class TitlesMode(Mode):
    """Answers from the titles of the routed sections, by the backbone (a toy)."""

    name = "titles"
    help = "answers from the routed sections' titles"
    trims_loops = True

    def plan(self, inputs: Request, ranked, quote) -> Step:
        ids = sorted(inputs.route.selected)
        titles = "\n".join(inputs.routing.title[i] for i in ids)
        return Step(text_plan(InProcessReader(inputs.rt.backbone), inputs.question.text, titles), ids,
                    "a toy mode: titles only")


@pytest.fixture
def titles_mode():
    register(TitlesMode)
    yield TitlesMode
    del MODES[TitlesMode.name]


def test_the_table_holds_every_mode_by_name_with_its_help_line():
    assert list(MODES) == ["memory", "text", "full", "flat", "route", "quote"]
    for name, mode in MODES.items():
        assert mode.name == name and issubclass(mode, Mode) and mode.help.strip()
    with pytest.raises(ValueError, match="exists already"):
        register(MODES["text"])


def test_a_mode_defined_in_one_file_answers_through_ask_stream(tiny_rt, titles_mode):
    rt, doc = tiny_rt
    question = "How do I power a large widget?"
    before = len(rt.library.list_queries(doc))
    events = list(ask_stream(rt, doc, question, AskOptions(mode="titles", k=2, max_new_tokens=5)))
    first, last = events[0], events[-1]
    assert isinstance(first, RouteReady) and isinstance(last, AnswerReady)
    assert [c.id for c in first.cited] == sorted(first.route.selected)
    chunks = [e.text for e in events[1:-1]]
    assert all(isinstance(e, TokenChunk) for e in events[1:-1])
    answer = last.answer
    assert answer.mode == "titles" and 1 <= answer.metrics.generated_tokens <= 5
    assert answer.text.startswith("".join(chunks)) and answer.warning.startswith("a toy mode")
    assert answer.quote is not None  # found after generation, as for any mode by default
    assert answer.metrics.ttft_ms > 0 and answer.metrics.quote_ms > 0
    log = rt.library.list_queries(doc)
    assert len(log) == before + 1 and log[-1].mode == "titles"


def test_an_unregistered_mode_is_refused(tiny_rt):
    rt, doc = tiny_rt
    with pytest.raises(AskError, match="unknown mode 'titles'"):
        ask_stream(rt, doc, "hello?", AskOptions(mode="titles"))


def test_each_mode_reads_the_ask_options_the_table_says():
    """Every Ask option is read by some mode (routing's by all, decoding's by all that
    generate), and the options a row names for some modes only are the ones those modes'
    modules read (``opts.<name>``)."""
    import inspect
    import re
    from dataclasses import fields

    from engine.answer.option_table import DECODING, OPTIONS, ROUTING, reads
    from engine.answer.options import AskOptions

    declared = {name for mode in MODES.values() for name in reads(mode)}
    assert declared | {"mode"} == {f.name for f in fields(AskOptions)}
    shared = {o.name for o in OPTIONS if o.read_by in (ROUTING, DECODING)}
    for mode in MODES.values():
        read = set(re.findall(r"opts\.([a-z_]+)", inspect.getsource(inspect.getmodule(mode))))
        own = {o.name for o in OPTIONS if o.read_by not in (ROUTING, DECODING)
               and mode.name in o.read_by}
        assert own == read - shared, mode.name
        assert {o.name for o in OPTIONS if o.read_by == ROUTING} <= set(reads(mode))
        assert ({o.name for o in OPTIONS if o.read_by == DECODING} <= set(reads(mode))
                or not mode.generates)
