"""URLs in settings: whether a value is an http(s) URL, its password kept out of messages."""
from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit


def is_url(spec: str | None) -> bool:
    """``spec`` is an http(s) URL (a served reader), not a model name, folder or file."""
    return bool(spec) and urlsplit(spec.strip()).scheme.lower() in ("http", "https")


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """``url`` without its userinfo (for messages and logs), and (user, password) when it had
    any (a served reader's URL may carry basic auth)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    userinfo = (unquote(parts.username or ""), unquote(parts.password or ""))
    return urlunsplit(parts._replace(netloc=netloc)), userinfo
