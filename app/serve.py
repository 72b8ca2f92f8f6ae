"""``manual-explorer``: serve the app (the console command of ``pip install .``; ``app.py`` of a
checkout and of a Hugging Face Space calls the same ``serve``).

    manual-explorer [--host 127.0.0.1] [--port 7860] [--data-dir DIR] [--db URL] [--share]
    manual-explorer --add-user NAME [--auth-file FILE]   (asks for the password)

Defaults come from the environment: ``GRADIO_SERVER_NAME`` and ``GRADIO_SERVER_PORT`` (a Space
sets them), and every ``H2MT_`` setting (``engine.settings``); the options override them.
``--share`` (off by default) asks Gradio for a public link through its relay.

Sign-in (app/shared/accounts.py): ``H2MT_AUTH`` / ``H2MT_AUTH_FILE`` turn on Gradio's own login for
the page and every API call; without them the app serves only 127.0.0.1 unless ``H2MT_OPEN=1``.

Everything is served locally: Gradio's own assets (its default theme uses bundled fonts) and the
plotly.js bundled with Gradio's plot component; nothing loads from a CDN.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7860


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="manual-explorer",
        description="Serve the manual explorer: upload technical manuals, ask questions, see how "
                    "the answer was found.")
    p.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", DEFAULT_HOST),
                   help="address to listen on (default: $GRADIO_SERVER_NAME or %(default)s; "
                        "0.0.0.0 for every interface)")
    p.add_argument("--port", type=int,
                   default=int(os.environ.get("GRADIO_SERVER_PORT", DEFAULT_PORT)),
                   help="port (default: $GRADIO_SERVER_PORT or %(default)s)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="folder of the library (default: $H2MT_DATA_DIR, else a Space's "
                        "persistent /data, ./data of a checkout, or ~/.local/share/h2mt-explorer)")
    p.add_argument("--db", default=None,
                   help="SQLAlchemy URL of the library (default: $H2MT_DB_URL, else SQLite in "
                        "the data folder)")
    p.add_argument("--share", action="store_true",
                   help="also publish a temporary public link through Gradio's relay (off by "
                        "default; needs sign-in or H2MT_OPEN=1)")
    p.add_argument("--add-user", metavar="NAME", default=None,
                   help="write NAME's salted password hash into the auth file (the password "
                        "is asked for, or read from stdin) and exit")
    p.add_argument("--auth-file", type=Path, default=None,
                   help="the auth file of --add-user (default: $H2MT_AUTH_FILE)")
    return p.parse_args(argv)


# glibc's M_ARENA_MAX (malloc.h). The server answers in a pool of worker threads; glibc gives
# threads their own heap arenas (up to 8 per core), and each keeps freed memory. Two arenas
# held the app lower over a soak (docs/results.md, "Soak, third run: the arena cap"); the creep
# that remained was Gradio's per-session component copies (app/server/sessions.py).
M_ARENA_MAX = -8
MALLOC_ARENAS = 2


def limit_malloc_arenas(environ=os.environ) -> bool:
    """Cap glibc's heap arenas for the threads started from now on (before the server starts
    its workers); a MALLOC_ARENA_MAX the user set is left alone, and other C libraries are
    skipped. True when the cap was set here."""
    if "MALLOC_ARENA_MAX" in environ or not sys.platform.startswith("linux"):
        return False
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # musl and other C libraries: no mallopt
        return False
    return bool(mallopt(M_ARENA_MAX, MALLOC_ARENAS))


def serve(*, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, data_dir: Path | None = None,
          db_url: str | None = None, share: bool = False) -> None:
    """Load the runtime (backbone, trained parts, library) and serve the app until stopped."""
    from app.server.mcp_auth import mcp_sign_in
    from app.server.page_cache import prune_rendered_pages
    from app.server.sessions import SESSION_CAPACITY, start_pruning
    from app.shared.accounts import Accounts, check_listen
    from app.shared.memory_writer import stop_memory_writer
    from app.ui import build_app, launch_app
    from engine.ask import start_generation_process
    from engine.runtime import Runtime
    from engine.settings import Settings
    from storage.connection import safe_url

    limit_malloc_arenas()
    settings = Settings.from_env().with_(data_dir=data_dir, db_url=db_url)
    if settings.generation_process is None:  # the app's default: decoding in its own process
        settings = settings.with_(generation_process=True)
    accounts = Accounts.from_settings(settings)
    check_listen(host, accounts, settings, share=share)  # before anything loads
    log = logging.getLogger("engine")
    log.info("library: %s", safe_url(settings.database_url))
    if accounts.enabled:
        log.info("sign-in on: %d names, admins: %s", len(accounts.names),
                 ", ".join(sorted(accounts.admins)) or "none (nobody may upload or delete)")
        for name in sorted(accounts.admins - accounts.names):
            log.warning("H2MT_ADMINS names %r, who cannot sign in", name)
    rt = Runtime.load(settings)
    start_generation_process(rt)  # the reader's decoding loads beside the page's start
    # H2MT_EXAMPLES=0: no example manual
    demo = build_app(rt, examples=settings.examples, accounts=accounts)
    # per-session copies Gradio never drops (app/server/sessions.py), and its rendered pages on disk
    start_pruning(demo, also=lambda: prune_rendered_pages(demo.GRADIO_CACHE,
                                                          settings.rendered_pages_kept))
    try:
        launch_app(
            demo.queue(default_concurrency_limit=4),
            server_name=host, server_port=port, share=share,
            auth=accounts.check if accounts.enabled else None,
            auth_message="Sign in with the name and password your team gave you.",
            max_file_size=f"{settings.max_upload_mb:g}mb",
            state_session_capacity=SESSION_CAPACITY, mcp_server=settings.mcp,
            # Gradio mounts MCP outside its login: the same names sign in there (HTTP Basic)
            app_kwargs={"middleware": mcp_sign_in(accounts.check)} if accounts.enabled else None)
    finally:  # Ctrl-C: the memory writer's thread ends its batch before the process exits
        stop_memory_writer(rt)


def add_user(name: str, auth_file: Path | None) -> int:
    """``--add-user``: one salted hash line into the auth file; the password from a prompt
    (twice) or, when stdin is not a terminal, its first line."""
    import getpass

    from app.shared.accounts import add_user as write_user
    from engine.settings import Settings

    path = auth_file or Settings.from_env().auth_file
    if path is None:
        print("error: name the file: --auth-file FILE or H2MT_AUTH_FILE", file=sys.stderr)
        return 2
    if sys.stdin.isatty():
        password = getpass.getpass(f"password for {name}: ")
        if getpass.getpass("again: ") != password:
            print("error: the two passwords differ; nothing written", file=sys.stderr)
            return 2
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    new = write_user(path, name, password)
    print(f"{'added' if new else 'changed the password of'} {name} in {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s",
                        stream=sys.stderr)
    logging.getLogger("engine").setLevel(logging.INFO)  # first start: fetch, dequantize
    from storage import DatabaseUnavailable
    from engine.settings import SettingsError

    try:
        if args.add_user is not None:
            return add_user(args.add_user, args.auth_file)
        serve(host=args.host, port=args.port, data_dir=args.data_dir, db_url=args.db,
              share=args.share)
    except (DatabaseUnavailable, SettingsError) as e:  # a wrong --db or H2MT_* value: one line
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
