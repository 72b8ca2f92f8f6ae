"""A PostgreSQL server of a test's own, which the test stops and starts (a database restarted in
the middle of an ask): a throwaway cluster in a temp folder, as scripts/postgres.sh makes one.
The suite's shared server (H2MT_TEST_PG_URL) is never restarted: other workers' tests use it.
``pg_server_or_skip`` skips, saying why, where PostgreSQL is not installed or cannot start."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.support.network import free_port


def pg_bindir() -> Path | None:
    """The folder of initdb and pg_ctl (Debian's versioned folder first), or None."""
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.access(os.path.join(d, "initdb"), os.X_OK):
            return Path(d)
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found else None


class PgServer:
    """One cluster in a new temp folder (under /tmp: the postgres user reaches it, not pytest's
    private tmp_path) on a free local port, trust auth, fsync off; ``url`` is its
    SQLAlchemy URL. ``stop()`` (fast shutdown: every connection cut, as a restart does) and
    ``start()`` as often as the test likes; ``close()`` stops it and removes it."""

    def __init__(self):
        self.bindir = pg_bindir()
        if self.bindir is None:
            raise RuntimeError("PostgreSQL is not installed (no initdb)")
        self.folder = Path(tempfile.mkdtemp(prefix="h2mt-faults-pg."))
        self.folder.chmod(0o755)
        self.run = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            self.run = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.folder, "postgres")
        self.data = self.folder / "data"
        self.port = free_port()
        self._cmd(["initdb", "-D", str(self.data), "-U", "h2mt", "--auth=trust", "-E", "UTF8"])
        self.start()
        self._cmd(["createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "h2mt", "faults"])
        self.url = f"postgresql+psycopg://h2mt@127.0.0.1:{self.port}/faults"

    def _cmd(self, argv: list[str]) -> None:
        argv = [*self.run, str(self.bindir / argv[0]), *argv[1:]]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {(done.stderr or done.stdout).strip()[-500:]}")

    def start(self) -> None:
        """Start and wait until it accepts connections (pg_ctl -w)."""
        self._cmd(["pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-w",
                   "-o", f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} "
                         "-c fsync=off", "start"])

    def stop(self) -> None:
        """Fast shutdown, waited for: the server is gone when this returns."""
        self._cmd(["pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop"])

    def close(self) -> None:
        try:
            self.stop()
        except RuntimeError:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)


def pg_server_or_skip() -> PgServer:
    try:
        return PgServer()
    except (RuntimeError, OSError, subprocess.TimeoutExpired, LookupError) as e:
        pytest.skip(f"no PostgreSQL server of the test's own: {e}")
