"""The bound on Gradio's per-session bookkeeping (app/server/sessions.py), on a real Gradio server.

A streaming handler that skips an output and then gives it a value (as the Ask tab does while
an answer streams) leaves a stale component copy in the session each time; the pruning removes
them and nothing the page still uses, and the next requests of the session still work.
"""
from __future__ import annotations

import gradio as gr
import pytest

from app.server.sessions import SESSION_CAPACITY, drop_stale_copies, prune_sessions
from tests.support.network import free_port


@pytest.fixture(scope="module")
def streaming_app():
    def stream(q):
        yield f"routing {q}", {"n": 1}  # the first values (the Ask tab: tree, tables)
        yield f"tok {q}", gr.skip()  # tokens: the figure output skipped
        yield f"answer {q}", {"n": len(q)}  # the final values

    with gr.Blocks(analytics_enabled=False) as demo:
        q = gr.Textbox()
        out = gr.Textbox()
        fig = gr.JSON()
        q.submit(stream, q, [out, fig], api_name="ask")
    demo.queue().launch(server_port=free_port(), prevent_thread_lock=True, quiet=True,
                        ssr_mode=False, state_session_capacity=SESSION_CAPACITY)
    yield demo
    demo.close()


def test_stale_copies_grow_without_pruning_and_are_dropped(streaming_app):
    from gradio_client import Client

    demo = streaming_app
    defined = set(demo.blocks)
    client = Client(demo.local_url, verbose=False)
    holder = demo.server_app.state_holder

    def session():
        return holder.session_data[client.session_hash]

    assert client.predict("a", api_name="/ask") == ("answer a", {"n": 1})
    sizes = []
    for q in ("bb", "ccc", "dddd"):
        client.predict(q, api_name="/ask")
        sizes.append(len(session().blocks_config.blocks))
    assert sizes[0] < sizes[1] < sizes[2], f"no copy left per request: {sizes}"  # Gradio's leak

    removed = prune_sessions(holder, defined)
    assert removed >= 3
    blocks = session().blocks_config.blocks
    current = {getattr(blocks[i], "_id", i) for i in defined}  # the outputs' current copies
    assert set(blocks) == defined | current
    assert drop_stale_copies(session(), defined) == 0  # nothing left to drop
    # the session goes on answering, and its outputs' current copies were kept
    assert client.predict("eeeee", api_name="/ask") == ("answer eeeee", {"n": 5})
    assert holder.capacity == SESSION_CAPACITY
