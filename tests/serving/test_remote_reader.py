"""The served reader's client against real servers on localhost: ``transformers serve`` on the
bundled backbone (the ``served_reader`` fixture) for answers and an unknown model, and small
socket servers in the test for what a real server does wrong (stalls, breaks off, errors)."""
from __future__ import annotations

import json
import socket
import time

import pytest

from engine.serving.remote_reader import ReaderError, RemoteReader, context_from_models
from engine.settings import Settings
from tests.support.network import free_port
from tests.support.scripted_server import SSE_HEAD, chunk, chunked, scripted  # noqa: F401

MESSAGES = [{"role": "system", "content": "You answer questions about a technical manual. Use "
                                          "the provided context; answer briefly and precisely."},
            {"role": "user", "content": "Manual sections:\n[1] Options (p. 3):\nThe -v option "
                                        "prints the version and exits.\n\nQuestion: Which option "
                                        "prints the version?"}]


def _json_response(status: str, body: dict) -> bytes:
    raw = json.dumps(body).encode()
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(raw)}"
            f"\r\nConnection: close\r\n\r\n").encode() + raw


# -- the real server ---------------------------------------------------------------------------

def test_streamed_answer_joins_to_the_whole_answer(served_reader):
    url, model = served_reader
    reader = RemoteReader(url, model)
    stream = reader.stream(MESSAGES, max_tokens=8)
    pieces = list(stream)
    r = stream.result
    assert len(pieces) >= 2 and "".join(pieces) == r.text and r.text.strip()
    assert r.finish_reason in ("stop", "length") and r.first_piece_at is not None
    whole = reader.complete(MESSAGES, max_tokens=8)
    assert whole.text == r.text  # greedy: the same answer streamed or whole
    assert whole.completion_tokens is not None and whole.completion_tokens <= 8


def test_unknown_model_names_the_server_and_its_error(served_reader):
    url, _ = served_reader
    with pytest.raises(ReaderError) as e:
        RemoteReader(url, "no-such-model").stream(MESSAGES, max_tokens=4)
    line = str(e.value)
    assert "\n" not in line and f"{url}/chat/completions" in line and "HTTP 400" in line
    assert "no-such-model" in line and "pinned" in line  # transformers serve's own words


def test_context_window_falls_back_to_the_setting(served_reader):
    url, model = served_reader  # transformers serve's /models says no context length
    assert RemoteReader(url, model, context_tokens=3000).context_tokens() == 3000
    status = RemoteReader(url, model).check()
    assert status.reachable and status.context_tokens is None


# -- what goes wrong ---------------------------------------------------------------------------

def test_server_down():
    url = f"http://127.0.0.1:{free_port()}/v1"  # a closed port
    reader = RemoteReader(url, "m")
    with pytest.raises(ReaderError) as e:
        reader.stream(MESSAGES, max_tokens=4)
    line = str(e.value)
    assert "\n" not in line and url in line and "cannot be reached" in line
    assert "refused" in line.lower() and "host.docker.internal" in line
    status = reader.check()
    assert not status.reachable and url in status.detail


def test_http_5xx_gives_the_servers_message(scripted):
    server = scripted(lambda c, s: c.sendall(_json_response(
        "503 Service Unavailable", {"error": {"message": "the engine is overloaded",
                                              "type": "server_error"}})))
    with pytest.raises(ReaderError) as e:
        RemoteReader(server.url, "m").stream(MESSAGES, max_tokens=4)
    assert str(e.value) == (f"the reader at {server.url}/chat/completions answered HTTP 503: "
                            "the engine is overloaded")


def test_stalled_server_times_out(scripted):
    server = scripted(lambda c, s: s.stop.wait(30))  # accepts, reads, never answers
    reader = RemoteReader(server.url, "m", stall_s=0.5)
    t = time.perf_counter()
    with pytest.raises(ReaderError) as e:
        reader.stream(MESSAGES, max_tokens=4)
    assert time.perf_counter() - t < 5
    assert "stalled" in str(e.value) and "0.5 s" in str(e.value) and server.url in str(e.value)


def test_server_stalling_mid_stream_times_out(scripted):
    def script(conn, server):
        conn.sendall(SSE_HEAD + chunked(chunk("The")) + chunked(chunk(" option")))
        server.stop.wait(30)

    server = scripted(script)
    stream = RemoteReader(server.url, "m", stall_s=0.5).stream(MESSAGES, max_tokens=4)
    got = []
    with pytest.raises(ReaderError) as e:
        for piece in stream:
            got.append(piece)
    assert got == ["The", " option"]
    assert "stalled" in str(e.value) and "after 2 pieces" in str(e.value)


def test_stream_that_breaks_off(scripted):
    def script(conn, server):  # half a chunk, then the connection is gone
        conn.sendall(SSE_HEAD + chunked(chunk("The")) + b"40\r\ndata: {\"cho")
        conn.shutdown(socket.SHUT_RDWR)

    server = scripted(script)
    with pytest.raises(ReaderError) as e:
        list(RemoteReader(server.url, "m").stream(MESSAGES, max_tokens=4))
    assert "broke off the answer after 1 pieces" in str(e.value) and server.url in str(e.value)


def test_stream_that_ends_unfinished(scripted):
    def script(conn, server):  # a well-formed end, but the answer never finished
        conn.sendall(SSE_HEAD + chunked(chunk("The")) + b"0\r\n\r\n")

    server = scripted(script)
    with pytest.raises(ReaderError, match="without finishing the answer"):
        list(RemoteReader(server.url, "m").stream(MESSAGES, max_tokens=4))


def test_error_in_the_stream(scripted):
    def script(conn, server):  # transformers serve's and vLLM's way of failing mid-answer
        conn.sendall(SSE_HEAD + chunked(chunk("The"))
                     + chunked(b'data: {"error": "CUDA out of memory"}\n\n') + b"0\r\n\r\n")

    server = scripted(script)
    with pytest.raises(ReaderError) as e:
        list(RemoteReader(server.url, "m").stream(MESSAGES, max_tokens=4))
    assert str(e.value) == (f"the reader at {server.url}/chat/completions failed mid-answer: "
                            "CUDA out of memory")


def test_streamed_events_of_a_scripted_server(scripted):
    def script(conn, server):
        conn.sendall(SSE_HEAD + chunked(chunk("Use")) + chunked(chunk(" -v"))
                     + chunked(chunk(None, "stop")) + chunked(b"data: [DONE]\n\n")
                     + b"0\r\n\r\n")

    server = scripted(script)
    stream = RemoteReader(server.url, "served/model").stream(MESSAGES, max_tokens=7)
    assert list(stream) == ["Use", " -v"] and stream.result.finish_reason == "stop"
    body = json.loads(server.requests[0].partition(b"\r\n\r\n")[2])
    assert body == {"model": "served/model", "messages": MESSAGES, "max_tokens": 7,
                    "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}


def test_api_key_is_sent_but_never_shown(scripted):
    key = "sk-secret-0123456789"

    def script(conn, server):  # a server that echoes the header it refuses
        auth = next(line for line in server.requests[-1].split(b"\r\n")
                    if line.lower().startswith(b"authorization:"))
        conn.sendall(_json_response("401 Unauthorized",
                                    {"error": {"message": f"bad key {auth.decode()}"}}))

    server = scripted(script)
    reader = RemoteReader(server.url, "m", api_key=key)
    with pytest.raises(ReaderError) as e:
        reader.stream(MESSAGES, max_tokens=4)
    assert f"Bearer {key}".encode() in server.requests[0]
    assert key not in str(e.value) and "H2MT_READER_API_KEY" in str(e.value)
    assert key not in repr(reader) and key not in reader.label
    settings = Settings(reader=server.url, reader_model="m", reader_api_key=key)
    assert key not in repr(settings)


def test_context_window_from_models(scripted):
    listing = {"object": "list", "data": [
        {"id": "other", "max_model_len": 2048},
        {"id": "Qwen/Qwen2.5-7B-Instruct", "object": "model", "max_model_len": 32768}]}
    server = scripted(lambda c, s: c.sendall(_json_response("200 OK", listing)))
    reader = RemoteReader(server.url, "Qwen/Qwen2.5-7B-Instruct", context_tokens=4096)
    assert reader.context_tokens() == 32768  # vLLM's max_model_len
    llama_cpp = [{"id": "model.gguf", "meta": {"n_ctx_train": 131072, "n_vocab": 32000}}]
    assert context_from_models(llama_cpp, "whatever-name") == 131072  # the only entry
    assert context_from_models([{"id": "a"}, {"id": "b"}], "c") is None
