"""The explorer's tools for agents and editors: the app's documented API, which Gradio serves as
MCP tools too (``launch(mcp_server=True)``, app/serve.py; off with ``H2MT_MCP=0``).

Gradio turns every public endpoint into an MCP tool, its description and argument types read
from the function's docstring ("Args:" lines) and type hints; so these functions are the only
MCP tools, and the page's own public endpoints (ingest, the Ask tab's full view, compare...) stay
in the documented API for HTTP clients (gradio_client fills their defaults from it) but are left
out of the tools by ``keep_page_endpoints_off_mcp``.
Gradio reads a docstring's "Args:" and "Returns:" entries one line each, hence their long lines.
Each tool returns a JSON text (Gradio's MCP server hands a tool's output to the client as text,
so a dict would reach it as a Python repr); a request's problem is one line (gr.Error). The
fifth tool, ``rate_answer`` (a verdict on an answer), is app/views/feedback.py's.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Literal, get_args

import gradio as gr

from app.shared.binding import bind
from app.shared.state import AppState, doc_arg
from app.shared.user_errors import user_error, user_errors
from app.views.feedback import rate_answer
from engine.ask import AskOptions
from storage.errors import DocumentNotFound

# the answer modes an agent may ask for: the reader's answer, or the manual's words alone
ToolMode = Literal["text", "quote", "route"]
TOOL_MODES = get_args(ToolMode)
OUTLINE_DEPTH = 3
ROUTE_NODES = 8  # the selected sections an ask reports, best first


def _tree(s: AppState, manual_id):
    try:
        return s.tree_of(int(manual_id))
    except (DocumentNotFound, TypeError, ValueError):
        raise user_error(f"no manual with id {manual_id!r} (list_manuals gives the ids)") from None


def as_json(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def list_manuals(s: AppState) -> str:
    """List the manuals in the library, with the id each other tool takes.

    Returns:
        A JSON list, one object per manual: id, title, file name, pages, nodes (sections and paragraphs of its tree) and memories ("ready", or how far their writing is).
    """
    return as_json([{"id": d.id, "title": d.title, "file": d.file_name, "pages": d.pages,
             "nodes": d.n_nodes, "memories": s.memory_label(d)}
            for d in s.rt.library.list_documents()])


def manual_outline(s: AppState, manual_id: int, max_depth: int = OUTLINE_DEPTH) -> str:
    """The outline of one manual: its section tree, one node a line, indented by depth, with
    the node id (for read_node), the title and the pages.

    Args:
        manual_id: the manual's id (from list_manuals).
        max_depth: the deepest level listed (1: the chapters only); deeper nodes are left out.

    Returns:
        Lines of "node id, title, pages, tokens".
    """
    return _tree(s, manual_id).outline(max(1, int(max_depth)))


def ask_manual(s: AppState, manual_id: str, question: str,
               mode: ToolMode = "text") -> str:
    """Ask a question about a manual (or "all": the whole library). The router walks the
    manual's section tree; the answer quotes the manual's best passage verbatim with its page,
    and (mode "text") a small model answers from the routed sections, checked against them.

    Args:
        manual_id: the manual's id (from list_manuals), or "all" for every manual.
        question: the question, in plain words.
        mode: "text": the quote and a generated answer with its check; "quote": the quote only (no generation, fast); "route": the routed sections only.

    Returns:
        A JSON object: the quote (text, page, section heading, node), up to three passages (text, page, page label, heading; the first is the quote), where the manual answers (places: "one place", or "several places" when the second passage scores close to the quote, or "weak"), the short answer (the manual's term with its line and page, or null; given only when H2MT_SHORT_ANSWER turns it on), the answer, its check (flagged, and why), the sections the router selected (title, pages, node), and the query id (rate_answer takes it).
    """
    if mode not in TOOL_MODES:
        raise user_error(f"mode {mode!r} is not one of {', '.join(TOOL_MODES)}")
    target = doc_arg(manual_id)
    with user_errors():
        answer = s.ask(target, question, AskOptions(mode=mode))
    out = answer.as_json()
    route = [r for r in out["route"] or [] if r["status"] == "selected"]
    route.sort(key=lambda r: -(r["score"] or 0.0))
    return as_json({"query_id": answer.query_id, "question": question, "mode": mode,
            "quote": out["quote"], "not_covered": out["not_covered"], "answer": answer.text,
            "passages": [{k: p[k] for k in ("text", "page", "page_label", "heading")}
                         for p in out["passages"]],
            "places": out["places"],
            "short_answer": out["short_answer"],
            "check": out["check"], "unsupported": out["unsupported"],
            "route": [{"title": r["title"], "manual": r["doc_id"], "node": r["node_id"],
                       "page_start": r["page_start"], "page_end": r["page_end"],
                       "score": r["score"]} for r in route[:ROUTE_NODES]],
            "cited": [asdict(c) for c in answer.cited], "warning": answer.warning})


def read_node(s: AppState, manual_id: int, node_id: int) -> str:
    """Read one node (section) of a manual: its own text, its heading path and its pages.

    Args:
        manual_id: the manual's id (from list_manuals).
        node_id: the node's id (from manual_outline, or an ask_manual quote's or route's node).

    Returns:
        A JSON object: title, path (the headings above it), page_start, page_end, text and the ids of its children (their text is not included).
    """
    tree = _tree(s, manual_id)
    try:
        n = tree.node(int(node_id))
    except (KeyError, TypeError, ValueError):
        raise user_error(f"manual #{manual_id} has no node {node_id!r}") from None
    labels = tree.labels()
    return as_json({"manual": int(manual_id), "node": n.id, "title": labels[n.id],
            "path": [labels[p.id] for p in tree.path(n.id)[1:-1]],
            "page_start": n.page_start, "page_end": n.page_end, "text": n.text,
            "children": [c.id for c in tree.children(n.id)]})


TOOLS = (list_manuals, manual_outline, ask_manual, read_node, rate_answer)


# Gradio 6.31 has no public switch to keep a documented endpoint out of the MCP tools; its MCP
# server lists an endpoint as a tool unless the function's ``_mcp_type`` (set by gr.mcp.tool,
# resource, prompt) is another kind (gradio/mcp.py, list_tools). "undocumented" would hide it from
# the API description too, and gradio_client then cannot fill a left-out parameter's default.
NOT_A_TOOL = "page"


def keep_page_endpoints_off_mcp(demo: gr.Blocks) -> None:
    """Mark every named endpoint that is not one of ``TOOLS`` as no MCP tool (see above)."""
    tools = {fn.__name__ for fn in TOOLS}
    for block_fn in demo.fns.values():
        if isinstance(block_fn.api_name, str) and block_fn.api_name not in tools \
                and block_fn.fn is not None:
            block_fn.fn._mcp_type = NOT_A_TOOL


def wire(s: AppState) -> None:
    """The tools as public API endpoints (and so MCP tools), named after their functions."""
    # unqueued: Gradio's MCP server calls them in the request (app/server/mcp_auth.py)
    for fn in TOOLS:
        gr.api(bind(s, fn), api_name=fn.__name__, queue=False)
