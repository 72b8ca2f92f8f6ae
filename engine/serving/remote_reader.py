"""A reader on an OpenAI-compatible server (vLLM, a llama.cpp server, Ollama, ``transformers
serve``): chat completions, streamed (``stream: true``) or whole, and the served model's context
window.

Written on httpx with httpx-sse rather than the ``openai`` package: the protocol is one POST and
a stream of server-sent events, and httpx gives what this needs directly: a connect timeout and a
read timeout that is the stall timeout between two pieces of the stream, no retries, the
server's own error body verbatim, and nothing read from the environment (the ``openai`` client
takes ``OPENAI_API_KEY`` when no key is given, and would send a user's OpenAI key to whatever
server ``H2MT_READER`` names).

Every failure a user can cause or meet (server down, unknown model, HTTP 4xx/5xx, a stream that
breaks off, a server that stalls) is one ``ReaderError`` line naming the URL and the server's own
error. The API key is sent in the Authorization header only: never logged, never in ``repr``,
never in an error (``_redact`` takes it out of anything the server echoes). A password in the
URL (``http://user:pw@host/v1``) is sent as basic auth and dropped from the URL that messages,
the label and ``repr`` show.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Iterator

import httpx
from httpx_sse import SSEError, connect_sse

from engine.settings import split_userinfo

# Where servers say a model's context window in their /models entry: vLLM's max_model_len,
# LM Studio's max_context_length, OpenRouter-style context_length / context_window, and a llama.cpp
# server's meta block (n_ctx of the running server, else the model's n_ctx_train).
_CONTEXT_KEYS = ("max_model_len", "context_length", "max_context_length", "context_window")
_META_CONTEXT_KEYS = ("n_ctx", "n_ctx_train")
_DOCKER_HINT = ("is the server running? inside a container, localhost is the container itself: "
                "use host.docker.internal or the host's address")


class ReaderError(RuntimeError):
    """The served reader failed: one line naming its URL and the server's own error."""


@dataclass
class ReaderStatus:
    """The outcome of the last reachability check (``RemoteReader.check``)."""

    reachable: bool
    detail: str  # the served models' count, or the error line
    checked_at: float  # time.time()
    context_tokens: int | None = None


@dataclass
class ChatResult:
    """What the server sent for one chat completion."""

    text: str
    finish_reason: str | None  # "stop" | "length" | ... ; None: the client stopped reading
    prompt_tokens: int | None = None  # from the server's usage block, when it sends one
    completion_tokens: int | None = None
    pieces: int = 0  # content pieces of a streamed answer
    first_piece_at: float | None = None  # time.perf_counter() of the first content piece


@dataclass
class ChatStream:
    """A streamed chat completion: iterate for the answer's text pieces as they come; ``result``
    fills in as they do. ``close()`` stops reading (the server then cancels the generation)."""

    events: Iterator  # httpx-sse's events
    close_response: object  # () -> None
    url: str
    redact: object  # (str) -> str without the API key
    stall_s: float
    result: ChatResult = field(default_factory=lambda: ChatResult("", None))

    def __iter__(self) -> Iterator[str]:
        r = self.result
        try:
            for sse in self.events:
                if sse.data.strip() == "[DONE]":
                    break
                try:
                    data = json.loads(sse.data)
                except ValueError:
                    raise ReaderError(f"the reader at {self.url} sent a piece that is not JSON: "
                                      f"{self.redact(sse.data[:200])}") from None
                if isinstance(data, dict) and data.get("error"):
                    raise ReaderError(f"the reader at {self.url} failed mid-answer: "
                                      f"{self.redact(_message(data))}")
                usage = data.get("usage") or {}
                r.prompt_tokens = usage.get("prompt_tokens", r.prompt_tokens)
                r.completion_tokens = usage.get("completion_tokens", r.completion_tokens)
                for choice in data.get("choices") or ():
                    piece = (choice.get("delta") or {}).get("content") or ""
                    if choice.get("finish_reason"):
                        r.finish_reason = choice["finish_reason"]
                    if piece:
                        if r.first_piece_at is None:
                            r.first_piece_at = time.perf_counter()
                        r.pieces += 1
                        r.text += piece
                        yield piece
        except httpx.TimeoutException:
            raise ReaderError(f"the reader at {self.url} stalled: nothing came for "
                              f"{self.stall_s:g} s after {r.pieces} pieces "
                              "(H2MT_READER_STALL_S)") from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as e:
            raise ReaderError(f"the reader at {self.url} broke off the answer after {r.pieces} "
                              f"pieces: {self.redact(str(e) or type(e).__name__)}") from None
        finally:
            self.close()
        if r.finish_reason is None:
            raise ReaderError(f"the reader at {self.url} ended the stream after {r.pieces} "
                              "pieces without finishing the answer (no finish_reason)")

    def close(self) -> None:
        self.close_response()


class RemoteReader:
    """An OpenAI-compatible server's chat completions for one served model.

    ``base_url`` ends in the API path (``http://host:8000/v1``); ``model`` is the served name.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *,
                 connect_s: float = 10.0, stall_s: float = 60.0, context_tokens: int = 4096):
        self.base_url, userinfo = split_userinfo(base_url.strip().rstrip("/"))
        self.model = model
        self._api_key = api_key or None
        self._secrets = tuple(x for x in (self._api_key, userinfo and userinfo[1]) if x)
        self.connect_s, self.stall_s = connect_s, stall_s
        self.default_context = context_tokens
        self._context: int | None = None
        self.status: ReaderStatus | None = None
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        # no retries: a failure is said at once
        self._client = httpx.Client(
            headers=headers, auth=httpx.BasicAuth(*userinfo) if userinfo else None, timeout=httpx.Timeout(stall_s, connect=connect_s, pool=connect_s))

    @classmethod
    def from_settings(cls, settings) -> "RemoteReader":
        return cls(settings.reader, settings.reader_model, settings.reader_api_key,
                   connect_s=settings.reader_connect_s, stall_s=settings.reader_stall_s,
                   context_tokens=settings.reader_context_tokens)

    def __repr__(self) -> str:  # the key is never part of it
        return f"RemoteReader({self.base_url!r}, model={self.model!r})"

    @property
    def label(self) -> str:
        """What the app and the JSON show as the reader: the model and where it is served."""
        return f"{self.model} at {self.base_url}"

    def close(self) -> None:
        self._client.close()

    # -- requests --------------------------------------------------------------------------------

    def models(self) -> list[dict]:
        """The server's GET /models entries."""
        url = f"{self.base_url}/models"
        with self._request_errors(url):
            resp = self._client.get(url)
            self._raise_for_status(resp, url)
        try:
            data = resp.json()
        except ValueError:
            raise ReaderError(f"the reader at {url} did not answer with JSON: "
                              f"{self._redact(resp.text[:200])}") from None
        return list(data.get("data") or []) if isinstance(data, dict) else []

    def context_tokens(self) -> int:
        """The served model's context window: from /models where the server says it (its entry
        for this model, or the only entry), else the setting (H2MT_READER_CONTEXT_TOKENS).
        Asked until the server answers once; meanwhile the setting stands."""
        if self._context is None:
            try:
                entries = self.models()
            except ReaderError:
                return self.default_context
            self._context = context_from_models(entries, self.model) or self.default_context
        return self._context

    def note(self, reachable: bool, detail: str) -> None:
        """Keep the outcome of an answer as the last check (``status``)."""
        self.status = ReaderStatus(reachable, detail, time.time(), self._context)

    def check(self) -> ReaderStatus:
        """Whether the server answers GET /models now (``self.status`` keeps the outcome)."""
        try:
            entries = self.models()
        except ReaderError as e:
            self.status = ReaderStatus(False, str(e), time.time())
        else:
            ctx = context_from_models(entries, self.model)
            self.status = ReaderStatus(True, f"{len(entries)} models listed", time.time(), ctx)
        return self.status

    def stream(self, messages: list[dict], *, max_tokens: int) -> ChatStream:
        """Start a streamed, greedy chat completion (``temperature: 0``). Connection and HTTP
        errors raise ``ReaderError`` here; those of the stream, while it is iterated."""
        url = f"{self.base_url}/chat/completions"
        body = self._body(messages, max_tokens, stream=True)
        cm = connect_sse(self._client, "POST", url, json=body)
        with self._request_errors(url):
            source = cm.__enter__()
            try:
                self._raise_for_status(source.response, url)
                events = source.iter_sse()
                first = next(events, None)  # the content type is checked at the first event
            except BaseException:
                cm.__exit__(None, None, None)
                raise
        return ChatStream(_chain(first, events), lambda: cm.__exit__(None, None, None), url,
                          self._redact, self.stall_s)

    def complete(self, messages: list[dict], *, max_tokens: int) -> ChatResult:
        """A whole (not streamed) greedy chat completion."""
        url = f"{self.base_url}/chat/completions"
        with self._request_errors(url):
            resp = self._client.post(url, json=self._body(messages, max_tokens, stream=False))
            self._raise_for_status(resp, url)
        try:
            data = resp.json()
            choice = data["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ReaderError(f"the reader at {url} sent no answer: "
                              f"{self._redact(resp.text[:200])}") from None
        usage = data.get("usage") or {}
        return ChatResult(text=(choice.get("message") or {}).get("content") or "",
                          finish_reason=choice.get("finish_reason"),
                          prompt_tokens=usage.get("prompt_tokens"),
                          completion_tokens=usage.get("completion_tokens"))

    # -- helpers ---------------------------------------------------------------------------------

    def _body(self, messages: list[dict], max_tokens: int, *, stream: bool) -> dict:
        # greedy, as the local reader decodes (engine.answer.generation.decoding: do_sample=False)
        body = {"model": self.model, "messages": messages, "max_tokens": int(max_tokens),
                "temperature": 0, "stream": stream}
        if stream:  # the token counts in a last chunk (vLLM sends them only when asked)
            body["stream_options"] = {"include_usage": True}
        return body

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[key]")
        return text

    def _raise_for_status(self, resp: httpx.Response, url: str) -> None:
        if resp.status_code < 400:
            return
        resp.read()
        said = self._redact(_message(_json_or_text(resp)) or resp.reason_phrase)
        hint = ""
        if resp.status_code in (401, 403):
            hint = " (check H2MT_READER_API_KEY)"
        elif resp.status_code in (400, 404) and "model" in said.lower():
            hint = f" (H2MT_READER_MODEL={self.model!r})"
        raise ReaderError(f"the reader at {url} answered HTTP {resp.status_code}: {said}{hint}")

    def _request_errors(self, url: str):
        return _RequestErrors(self, url)


class _RequestErrors:
    """Turns httpx's connection errors of one request into a ReaderError line."""

    def __init__(self, reader: RemoteReader, url: str):
        self.reader, self.url = reader, url

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb):
        if err is None or isinstance(err, ReaderError):
            return False
        r, url = self.reader, self.url
        if isinstance(err, httpx.ConnectTimeout):
            raise ReaderError(f"the reader at {url} did not accept a connection within "
                              f"{r.connect_s:g} s ({_DOCKER_HINT})") from None
        if isinstance(err, httpx.TimeoutException):
            raise ReaderError(f"the reader at {url} stalled: no answer for {r.stall_s:g} s "
                              "(H2MT_READER_STALL_S)") from None
        if isinstance(err, httpx.ConnectError):
            raise ReaderError(f"the reader at {url} cannot be reached: "
                              f"{r._redact(_cause(err))} ({_DOCKER_HINT})") from None
        if isinstance(err, (httpx.RemoteProtocolError, httpx.ReadError)):
            raise ReaderError(f"the reader at {url} broke off before answering: "
                              f"{r._redact(_cause(err))}") from None
        if isinstance(err, SSEError):
            raise ReaderError(f"the reader at {url} did not answer with an event stream: "
                              f"{r._redact(str(err))}") from None
        if isinstance(err, httpx.HTTPError):
            raise ReaderError(f"the reader at {url} failed: {r._redact(_cause(err))}") from None
        return False


def _chain(first, events) -> Iterator:
    if first is not None:
        yield first
        yield from events


def _cause(err: Exception) -> str:
    """The innermost reason of an httpx error ("[Errno 111] Connection refused")."""
    text = str(err) or type(err).__name__
    return text.splitlines()[0]


def _json_or_text(resp: httpx.Response):
    try:
        return resp.json()
    except ValueError:
        return resp.text.strip()[:300]


def _message(data) -> str:
    """The error message of a server's error body, in the shapes servers use: OpenAI, vLLM and
    llama.cpp ``{"error": {"message": ...}}``, Ollama ``{"error": "..."}``, FastAPI (``transformers
    serve``) ``{"detail": ...}``, or ``{"message": ...}``; else the body itself."""
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            return str(err.get("message") or err)
        for value in (err, data.get("detail"), data.get("message")):
            if value:
                return str(value)
        return json.dumps(data)[:300]
    return str(data)[:300]


def context_from_models(entries: list[dict], model: str) -> int | None:
    """The context window a /models listing gives for ``model`` (its entry, or the only one)."""
    mine = [e for e in entries if isinstance(e, dict) and e.get("id") == model]
    if not mine and len(entries) == 1 and isinstance(entries[0], dict):
        mine = entries
    for entry in mine:
        for key in _CONTEXT_KEYS:
            if isinstance(entry.get(key), int) and entry[key] > 0:
                return entry[key]
        meta = entry.get("meta") or {}
        for key in _META_CONTEXT_KEYS:
            if isinstance(meta.get(key), int) and meta[key] > 0:
                return meta[key]
    return None

