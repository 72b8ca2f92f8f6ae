"""Sign-in on the MCP endpoint (app/server/mcp_auth.py): a real Gradio app with its login and its
MCP server; an MCP request without the app's name and password gets 401, the mcp package's client
with them lists and calls the tools."""
from __future__ import annotations

import asyncio
import base64

import gradio as gr
import httpx
import pytest

from app.server.mcp_auth import basic_credentials, mcp_sign_in

NAME, PASSWORD = "ann", "s3cret:with colon"


def _basic(name: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()


def test_basic_credentials_are_read_or_refused():
    assert basic_credentials([(b"Authorization", _basic(NAME, PASSWORD).encode())]) == (NAME,
                                                                                       PASSWORD)
    for bad in [b"Bearer abc", b"Basic !!!", b"Basic " + base64.b64encode(b"no-colon")]:
        assert basic_credentials([(b"authorization", bad)]) is None
    assert basic_credentials([]) is None


def check(name: str, password: str) -> bool:
    return (name, password) == (NAME, PASSWORD)


def shout(text: str) -> str:
    """Say it louder.

    Args:
        text: what to say.
    """
    return text.upper()


@pytest.fixture(scope="module")
def signed_in_app():
    from tests.support.network import free_port

    with gr.Blocks(analytics_enabled=False) as demo:
        gr.api(shout, api_name="shout", queue=False)
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port,
                quiet=True, ssr_mode=False, auth=check, mcp_server=True,
                app_kwargs={"middleware": mcp_sign_in(check)})
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


def test_the_mcp_endpoint_needs_the_apps_sign_in(signed_in_app):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    mcp_url = signed_in_app + "gradio_api/mcp/"
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in [{}, {"Authorization": _basic(NAME, "wrong")}]:
        r = httpx.post(mcp_url, json=hello, headers={**accept, **headers})
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Basic")
        assert "Sign in" in r.text
    assert httpx.get(signed_in_app + "gradio_api/mcp/sse", timeout=5).status_code == 401
    assert httpx.get(signed_in_app + "config").status_code == 401  # the page: Gradio's login

    async def calls():
        async with streamablehttp_client(mcp_url, headers={
                "Authorization": _basic(NAME, PASSWORD)}) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = (await session.list_tools()).tools
                result = await session.call_tool("shout", {"text": "hi"})
                return tools, result

    tools, result = asyncio.run(calls())
    assert [t.name for t in tools] == ["shout"]
    assert not result.isError and result.content[0].text == "HI"
