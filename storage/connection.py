"""Opening a database: the SQLAlchemy engine for a URL (SQLite: its folder, WAL, a busy timeout,
foreign keys) and the URL as messages may show it (no password)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import StaticPool

LOCK_TIMEOUT_S = 30.0  # the default wait for a lock another process holds (H2MT_DB_LOCK_TIMEOUT_S)


def lock_timeout_s() -> float:
    """How long a write waits for a lock another process holds before it fails with one line
    (storage/faults.py): SQLite's busy timeout, PostgreSQL's ``lock_timeout``.
    ``H2MT_DB_LOCK_TIMEOUT_S`` (engine.settings checks it), else 30 s."""
    raw = os.environ.get("H2MT_DB_LOCK_TIMEOUT_S")
    try:
        value = float(raw) if raw else LOCK_TIMEOUT_S
    except ValueError:
        return LOCK_TIMEOUT_S
    return value if value > 0 else LOCK_TIMEOUT_S


def safe_url(url: str) -> str:
    """The URL with any password hidden, for logs and messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:  # not an SQLAlchemy URL: drop the userinfo of a generic URL
        parts = urlsplit(url)
        if not parts.username and not parts.password:
            return url
        netloc = f"***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))


def first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def make_engine(url: str, *, echo: bool) -> Engine:
    """An engine for ``url``; SQLite gets its folder, WAL, a busy timeout and foreign keys."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        engine = create_engine(url, echo=echo, pool_pre_ping=True)
        if engine.dialect.name == "postgresql":  # a row lock waited for at most the timeout
            timeout_ms = int(lock_timeout_s() * 1000)

            @event.listens_for(engine, "connect")
            def _pg_lock_timeout(dbapi_connection: Any, _record: Any) -> None:
                autocommit = dbapi_connection.autocommit
                dbapi_connection.autocommit = True
                try:
                    with dbapi_connection.cursor() as cursor:
                        cursor.execute(f"SET lock_timeout = {timeout_ms}")
                finally:
                    dbapi_connection.autocommit = autocommit
        return engine
    database = parsed.database or ""
    in_memory = database in ("", ":memory:") or "mode=memory" in database
    if in_memory:  # one shared connection, or every connection would see its own empty database
        engine = create_engine(url, echo=echo, poolclass=StaticPool,
                               connect_args={"check_same_thread": False})
    else:
        if not database.startswith("file:"):
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, echo=echo)

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            if not in_memory:
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={int(lock_timeout_s() * 1000)}")
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    return engine
