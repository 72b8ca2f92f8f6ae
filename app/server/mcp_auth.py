"""Sign-in for the MCP endpoint: with the app's sign-in on, an MCP client signs in too.

Gradio mounts its MCP server (``/gradio_api/mcp/...``) beside its login, not behind it: the tool
list and the tools are open to anyone. So this middleware asks every MCP request for HTTP Basic
credentials (``Authorization: Basic base64(name:password)``, a header every MCP client can send),
checks them with the app's own sign-in (the callable given to ``launch(auth=...)``) and answers 401
without them. The tools run unqueued (app/server/mcp_tools.py): Gradio calls them directly in the
MCP request, not through a loopback client that would need a Gradio login cookie.

Hand-written because Gradio offers no hook for it (its ``auth_dependency`` guards its own
routes, not the mounted MCP app); a Starlette ``Middleware`` in ``launch(app_kwargs=...)``.
"""
from __future__ import annotations

import base64
import binascii
from typing import Callable

from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse

MCP_PREFIX = "/gradio_api/mcp"
REALM = 'Basic realm="manual explorer MCP", charset="UTF-8"'


def basic_credentials(headers: list[tuple[bytes, bytes]]) -> tuple[str, str] | None:
    """(name, password) of an ``Authorization: Basic`` header; None without a well-formed one."""
    for key, value in headers:
        if key.lower() != b"authorization":
            continue
        scheme, _, token = value.decode("latin-1").partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            name, sep, password = base64.b64decode(token.strip(), validate=True).decode(
                "utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return (name, password) if sep else None
    return None


class McpSignIn:
    """ASGI middleware: requests under ``MCP_PREFIX`` need credentials ``check`` accepts."""

    def __init__(self, app, check: Callable[[str, str], bool]):
        self.app, self.check = app, check

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith(MCP_PREFIX):
            await self.app(scope, receive, send)
            return
        creds = basic_credentials(scope.get("headers", []))
        if creds is None or not self.check(*creds):
            response = PlainTextResponse(
                "Sign in: send the app's name and password as HTTP Basic credentials.",
                status_code=401, headers={"WWW-Authenticate": REALM})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def mcp_sign_in(check: Callable[[str, str], bool]) -> list[Middleware]:
    """``launch(app_kwargs={"middleware": mcp_sign_in(check)})`` where ``auth=check``."""
    return [Middleware(McpSignIn, check=check)]
