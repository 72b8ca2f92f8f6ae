"""``python -m engine`` processes started from a preloaded parent, for tests that start the CLI
many times and kill it (tests/test_crash.py: kill -9 in the middle of an ingest, ten times a
test).

A fresh interpreter spends about five seconds of each such run (on one core) importing torch,
transformers and the sentence encoder's library before it opens the manual, the same imports in
every run. ``preloaded_cli(env)`` starts one parent process, with the runs' environment, that
imports those libraries once (``PRELOAD``) and then forks a child per run. The child runs
``python -m engine``'s ``__main__`` module with the run's arguments, its stdout and stderr in
files: it imports the engine and PyMuPDF, loads the model, opens the library and writes as a
process started from the shell does, is killed as one, and when it is not killed it ends as one
(the interpreter's own exit, its teardown included). The parent only imports: it loads no
model, opens no library, runs no torch operation, and it has no thread but its main one when
it forks (checked; PyMuPDF is not preloaded because importing it starts a thread of ONNX
Runtime's, which a forked child would lack). Its environment is the runs' own, so what a
library reads from the environment at import is what a fresh ``python -m engine`` reads.

One child runs at a time. The parent takes a JSON line per run on its stdin and answers on its
stdout with the child's pid, then with its return code (``-9`` for a SIGKILL, as
``subprocess.Popen.returncode`` gives it) once the child is gone.
"""
from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The libraries ``python -m engine ingest`` imports before it reads the manual, and none that
# starts a thread: torch, transformers' auto classes, the Llama model and the tokenizers (the
# backbone), the sentence encoder's library and BERT (the dense channel), the database layer.
PRELOAD = ("torch", "numpy", "scipy.sparse", "sklearn.linear_model", "networkx", "sqlalchemy.orm",
           "tqdm", "transformers.models.auto.modeling_auto",
           "transformers.models.auto.tokenization_auto", "transformers.models.llama.modeling_llama",
           "transformers.models.bert.modeling_bert", "sentence_transformers")
START_S = 240  # the parent's imports on a busy two-core machine


class CliChild:
    """One ``python -m engine ...`` run, as much of ``subprocess.Popen`` as the tests use:
    ``pid``, ``poll()``, ``wait()``, ``returncode``; ``stdout`` and ``stderr`` are files."""

    def __init__(self, parent: "PreloadedCli", pid: int, stdout: Path, stderr: Path):
        self._parent, self.pid, self.stdout, self.stderr = parent, pid, stdout, stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._parent._collect(self, 0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"python -m engine (pid {self.pid})", timeout)
            self._parent._collect(self, left)
        return self.returncode


class PreloadedCli:
    """The preloaded parent (see the module docstring); ``start(args)`` runs
    ``python -m engine *args`` as its child."""

    def __init__(self, env: dict, folder: Path, cwd: Path = ROOT):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._log = open(self.folder / "parent.log", "wb")
        self._buf = b""
        self._runs = 0
        self._child: CliChild | None = None
        self.proc = subprocess.Popen([sys.executable, "-m", __name__], cwd=cwd, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log)
        try:
            ready = self._reply(START_S)
            assert ready == {"ready": True}, ready
        except BaseException:
            self.close()
            raise

    def start(self, args: list[str]) -> CliChild:
        assert self._child is None or self._child.returncode is not None, "one run at a time"
        self._runs += 1
        out = self.folder / f"run-{self._runs}.stdout"
        err = self.folder / f"run-{self._runs}.stderr"
        out.touch()
        err.touch()
        self.proc.stdin.write(json.dumps({"args": [str(a) for a in args], "stdout": str(out),
                                          "stderr": str(err)}).encode() + b"\n")
        self.proc.stdin.flush()
        started = self._reply(60)
        self._child = CliChild(self, started["pid"], out, err)
        return self._child

    def _collect(self, child: CliChild, timeout: float | None) -> None:
        """The child's return code, when the parent reports it within ``timeout`` seconds."""
        if not self._buf.count(b"\n") and not select.select([self.proc.stdout], [], [],
                                                            timeout)[0]:
            return
        done = self._reply(60)
        assert done["pid"] == child.pid, done
        child.returncode = done["returncode"]

    def _reply(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                raise TimeoutError(f"the preloaded CLI parent did not answer in {timeout} s: "
                                   f"{self._parent_log()}")
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                raise RuntimeError(f"the preloaded CLI parent exited ({self.proc.wait()}): "
                                   f"{self._parent_log()}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def _parent_log(self) -> str:
        self._log.flush()
        return (self.folder / "parent.log").read_text(errors="replace")[-3000:]

    def close(self) -> None:
        child = self._child
        if child is not None and child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                child.wait(30)
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(OSError):
            self.proc.stdout.close()
        self._log.close()


@contextlib.contextmanager
def preloaded_cli(env: dict, folder: Path) -> Iterator[PreloadedCli]:
    """A preloaded parent with the runs' environment ``env`` (its log and the runs' output in
    ``folder``), stopped on leaving the block."""
    cli = PreloadedCli(env, folder)
    try:
        yield cli
    finally:
        cli.close()


# -- the parent ---------------------------------------------------------------------------------

def _serve() -> None:
    import importlib
    import threading

    # the protocol gets fds of its own; stray prints (of an import) go to the parent's log
    requests, replies = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)

    def reply(obj: dict) -> None:
        os.write(replies, json.dumps(obj).encode() + b"\n")

    for name in PRELOAD:
        importlib.import_module(name)
    assert "pymupdf" not in sys.modules and "engine" not in sys.modules, "imported by a preload"
    reply({"ready": True})
    with os.fdopen(requests, "rb", buffering=0) as lines:
        for line in iter(lines.readline, b""):
            req = json.loads(line)
            threads = os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else [1]
            assert threading.active_count() == 1 and len(threads) == 1, (
                f"the parent has threads: {threading.enumerate()}, {len(threads)} tasks")
            pid = os.fork()
            if pid == 0:
                os.close(replies)
                lines.close()
                _run_child(req)
            reply({"pid": pid})
            _, status = os.waitpid(pid, 0)
            reply({"pid": pid, "returncode": os.waitstatus_to_exitcode(status)})


def _run_child(req: dict) -> None:
    """``python -m engine *args`` in this (forked) process: it ends as that command does, by
    the SystemExit (or the exception) that leaves the engine's ``__main__`` module, which ends
    this interpreter."""
    import runpy

    for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
        f = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.dup2(f, fd)
        os.close(f)
    sys.argv = ["-m", *req["args"]]  # run_module puts the module's path first, as -m does
    runpy.run_module("engine", run_name="__main__", alter_sys=True)
    sys.exit(0)


if __name__ == "__main__":
    _serve()
