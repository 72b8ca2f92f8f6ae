"""A scripted HTTP server on localhost for the served reader's tests: a real TCP server whose
every connection runs a script (what a real server does wrong: stalls, breaks off, errors), the
``scripted`` fixture that starts them, and the pieces of a streamed chat completion."""
from __future__ import annotations

import json
import socket
import threading

import pytest


class ScriptedServer:
    """A real TCP server on a free local port whose every connection runs ``script(conn)``
    after the request has been read (headers and body)."""

    def __init__(self, script):
        self.script = script
        self.requests: list[bytes] = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                body += conn.recv(65536)
            self.requests.append(head + b"\r\n\r\n" + body)
            try:
                self.script(conn, self)
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def scripted():
    servers = []

    def start(script) -> ScriptedServer:
        servers.append(ScriptedServer(script))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def chunk(content: str | None = None, finish: str | None = None) -> bytes:
    """One server-sent event of a streamed chat completion."""
    delta = {"content": content} if content is not None else {}
    event = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(event)}\n\n".encode()


def chunked(payload: bytes) -> bytes:
    """``payload`` as one piece of a chunked HTTP body."""
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


SSE_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
