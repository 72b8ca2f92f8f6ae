"""Decoding on a served reader: the same greedy answer, stop and loop cut as the in-process
reader (``transformers serve`` on the bundled backbone), and the loop stop on a scripted stream."""
from __future__ import annotations

import pytest

from engine.answer.generation.decoding import Decoding, Plan, generate
from engine.answer.generation.prompts import SYSTEM_PROMPT, chat_messages, chat_parts, embed_text as _embed_text
from engine.serving.remote_decoding import RemoteStreamed
from engine.serving.remote_reader import RemoteReader
from tests.support.scripted_server import SSE_HEAD, chunk, chunked, scripted  # noqa: F401


@pytest.mark.parametrize("question, stop", [
    ("List every option of the tool.", "repeat"),  # the 135M model loops: the 4-token rule
    ("Repeat the word yes many times.", "eos"),  # ends on its own
])
def test_same_answer_and_stop_as_in_process(served_reader, real_backbone, question, stop):
    url, model = served_reader
    (prompt,) = chat_parts(real_backbone, question, SYSTEM_PROMPT)
    local = generate(Plan(real_backbone, [_embed_text(real_backbone, prompt)]),
                     Decoding(max_new_tokens=64))
    served = RemoteStreamed(RemoteReader(url, model), chat_messages(question, SYSTEM_PROMPT),
                            max_new_tokens=64)
    shown = "".join(served)
    r = served.result
    assert (r.stop, r.text, r.generated_tokens) == (local.stop, local.text, local.generated_tokens)
    assert r.stop == stop and shown.strip() == r.text
    assert r.prefill_tokens == (0 if stop == "repeat" else local.prefill_tokens)
    assert r.first_token_at is not None


def test_a_cut_answer_says_length(served_reader):
    url, model = served_reader
    served = RemoteStreamed(RemoteReader(url, model), chat_messages("What is Linux?", SYSTEM_PROMPT),
                            max_new_tokens=5)
    text = "".join(served)
    assert served.result.stop == "length" and served.result.generated_tokens == 5
    assert text.strip() == served.result.text and served.result.cut


def test_a_loop_is_cut_off_and_never_shown(scripted):
    """13 distinct pieces said twice and more: the 16-piece rule fires on the second round and
    its 16 newest pieces go; the pieces shown join to one round, and the stream is closed."""
    unit = [f" w{i}" for i in range(13)]
    body = b"".join(chunked(chunk(p)) for p in unit * 4)

    server = scripted(lambda conn, s: conn.sendall(SSE_HEAD + body + chunked(chunk(None, "stop"))
                                                   + b"0\r\n\r\n"))
    served = RemoteStreamed(RemoteReader(server.url, "m"), chat_messages("q", "s"),
                            max_new_tokens=100)
    shown = list(served)
    assert shown == unit and served.result.stop == "loop"
    assert served.result.text == "".join(unit).strip() and served.result.generated_tokens == 29
    off = RemoteStreamed(RemoteReader(server.url, "m"), chat_messages("q", "s"),
                         max_new_tokens=100, guard=False)
    assert "".join(off) == "".join(unit * 4) and off.result.stop == "eos"
