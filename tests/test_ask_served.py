"""ask() with the reader on a server (``transformers serve`` on the bundled backbone): text and
full modes stream from it; routing, the quote and memory mode stay local; a server that fails
gives one line in the answer's JSON, with the quote and the route, and nothing logged."""
from __future__ import annotations

import json

import pytest

from engine.answer.events import AnswerReady, RouteReady, TokenChunk
from engine.ask import AskOptions, ask, ask_stream
from engine.ingest import ingest_file
from engine.memory.parts import H2MTParts
from engine.runtime import Runtime
from engine.settings import Settings
from storage import Library
from tests.support.network import free_port
from tests.support.runtime import MANUAL


def served_runtime(backbone, tmp_path, url: str, model: str) -> Runtime:
    """A runtime on ``backbone`` (routing, memories) whose reader is the server at ``url``."""
    settings = Settings(data_dir=tmp_path, reader=url, reader_model=model)
    parts = H2MTParts(backbone.hidden_size, "mean").init_from_backbone(backbone)
    return Runtime(settings, backbone, parts.eval(), Library(settings.database_url))


@pytest.fixture(scope="module")
def served_rt(tiny_backbone, served_reader, tmp_path_factory):
    url, model = served_reader
    tmp = tmp_path_factory.mktemp("served")
    rt = served_runtime(tiny_backbone, tmp, url, model)
    md = tmp / "widgets.md"
    md.write_text(MANUAL)
    return rt, ingest_file(md, rt).doc_id


def test_text_mode_streams_from_the_server(served_rt, served_reader):
    rt, doc = served_rt
    url, model = served_reader
    before = len(rt.library.list_queries())
    events = list(ask_stream(rt, doc, "How do I power a large widget?",
                             AskOptions(mode="text", max_new_tokens=12)))
    assert isinstance(events[0], RouteReady) and isinstance(events[-1], AnswerReady)
    chunks = [e.text for e in events[1:-1]]
    assert chunks and all(isinstance(e, TokenChunk) for e in events[1:-1])
    answer = events[-1].answer
    out = answer.as_json()
    json.dumps(out)
    assert out["reader"] == f"{model} at {url}" and out["reader_error"] is None
    assert answer.text.startswith("".join(chunks)) and answer.quote is not None
    # the shipped check is fitted on the bundled reader, not on this one: it says so, no score
    assert out["confidence"]["confidence"] is None and not out["confidence"]["low"]
    assert f"The answer check has no fit for the reader {model} at {url}" in out["warning"]
    assert answer.metrics.ttft_ms > 0 and answer.metrics.generated_tokens >= 1
    assert len(rt.library.list_queries()) == before + 1
    assert rt.reader.remote.status.reachable


def test_memory_mode_stays_local(served_rt):
    rt, doc = served_rt
    out = ask(rt, doc, "How do I power a large widget?",
              AskOptions(mode="memory", max_new_tokens=3), log=False).as_json()
    assert out["reader"] is None and out["reader_error"] is None
    assert out["metrics"]["generated_tokens"] >= 1


@pytest.mark.parametrize("mode", ["text", "full"])
def test_a_server_that_is_down_gives_one_line_and_keeps_the_quote(tiny_backbone, tmp_path, mode):
    url = f"http://127.0.0.1:{free_port()}/v1"
    rt = served_runtime(tiny_backbone, tmp_path, url, "some-model")
    md = tmp_path / "widgets.md"
    md.write_text(MANUAL)
    doc = ingest_file(md, rt).doc_id
    answer = ask(rt, doc, "How do I power a large widget?", AskOptions(mode=mode, max_new_tokens=4))
    out = answer.as_json()
    line = out["reader_error"]
    assert line and "\n" not in line and url in line and "cannot be reached" in line
    assert out["answer"] == "" and out["quote"] is not None and out["reader"] == f"some-model at {url}"
    assert (out["route"] is not None) == (mode == "text")
    assert rt.library.list_queries() == []  # nothing logged as an answer
    assert not rt.reader.remote.status.reachable
