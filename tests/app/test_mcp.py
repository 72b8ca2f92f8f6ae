"""The app as an MCP server (app/server/mcp_tools.py): a real MCP client (the ``mcp`` package, over
Gradio's streamable HTTP transport) lists the tools and asks the example manual a question."""
from __future__ import annotations

import asyncio
import json

import pytest

from engine.settings import Settings, SettingsError

TOOLS = {"list_manuals", "manual_outline", "ask_manual", "read_node", "rate_answer"}
QUESTION = "How do I append code to a macro?"


@pytest.mark.parametrize("raw,value", [("0", False), ("off", False), ("1", True)])
def test_mcp_setting(raw, value):
    assert Settings().mcp is True
    assert Settings.from_env({"H2MT_MCP": raw}).mcp is value


def test_mcp_setting_refuses_other_values_in_one_line():
    with pytest.raises(SettingsError, match="H2MT_MCP='maybe'"):
        Settings.from_env({"H2MT_MCP": "maybe"})


async def _mcp_session(url: str, calls):
    """Open an MCP session on the app's endpoint and run ``calls(session)``."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with streamablehttp_client(url + "gradio_api/mcp/", timeout=30,
                                     sse_read_timeout=900) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await calls(session)


def _json(result) -> object:
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


@pytest.mark.real_model
def test_mcp_client_asks_a_real_manual(explorer_server):
    from app.shared.examples import EXAMPLE_FILE
    from engine.ingest import ingest_file

    url, rt = explorer_server
    doc_id = ingest_file(EXAMPLE_FILE, rt, memories=False).doc_id

    async def calls(session):
        tools = {t.name: t for t in (await session.list_tools()).tools}
        manuals = _json(await session.call_tool("list_manuals", {}))
        outline = await session.call_tool("manual_outline",
                                          {"manual_id": doc_id, "max_depth": 1})
        asked = _json(await session.call_tool("ask_manual", {"manual_id": str(doc_id),
                                                             "question": QUESTION}))
        node = _json(await session.call_tool(
            "read_node", {"manual_id": doc_id, "node_id": asked["quote"]["node"]}))
        missing = await session.call_tool("read_node", {"manual_id": 9999, "node_id": 0})
        return tools, manuals, outline, asked, node, missing

    tools, manuals, outline, asked, node, missing = asyncio.run(_mcp_session(url, calls))
    # the five documented tools only: the page's own endpoints (ingest, the Ask tab's view,
    # compare, ...) are no tools; descriptions and argument types from docstrings and hints
    assert set(tools) == TOOLS, sorted(tools)
    ask_schema = tools["ask_manual"].inputSchema
    assert ask_schema["required"] == ["manual_id", "question"]
    assert ask_schema["properties"]["mode"]["enum"] == ["text", "quote", "route"]
    assert "quotes the manual" in tools["ask_manual"].description
    assert tools["read_node"].inputSchema["properties"]["node_id"]["type"] == "integer"

    assert any(m["id"] == doc_id and m["file"] == EXAMPLE_FILE.name for m in manuals)
    assert not outline.isError and "etoolbox" in outline.content[0].text.lower()
    # the answer: the manual's quote with its page, the generated answer and its check
    quote = asked["quote"]
    assert quote is not None and quote["text"].strip(), asked
    assert quote["doc"] == doc_id and isinstance(quote["page"], int) and quote["page"] >= 1
    # up to three passages, the first the quote, each with its page and heading
    passages = asked["passages"]
    assert 1 <= len(passages) <= 3
    assert passages[0]["text"] == quote["text"] and passages[0]["page"] == quote["page"]
    assert all(set(p) == {"text", "page", "page_label", "heading"} for p in passages)
    assert asked["short_answer"] is None  # off by default (H2MT_SHORT_ANSWER)
    assert asked["answer"].strip() and asked["check"] is not None
    assert "flagged" in asked["check"]
    assert asked["route"] and all(r["manual"] == doc_id for r in asked["route"])
    assert rt.library.get_query(asked["query_id"]).question == QUESTION
    # the quoted node, read through its tool, holds the quote on the quote's page
    assert node["page_start"] <= quote["page"] <= node["page_end"]
    words = " ".join(node["text"].split())
    first = " ".join(quote["text"].split())[:40]
    assert first in words, (first, words[:300])
    # a wrong id is the tool's one-line error, not a crash
    assert missing.isError and "no manual with id 9999" in missing.content[0].text
