"""Shared fixtures: the corpus folder beside the repository and one parsed tree per file."""
from __future__ import annotations

import contextlib
import os
from functools import lru_cache
from pathlib import Path

import pytest

from tests.support.network import free_port

# ../shared beside the repository; H2MT_SHARED_DIR points elsewhere (a checkout in another folder)
SHARED = Path(os.environ.get("H2MT_SHARED_DIR") or Path(__file__).resolve().parents[1].parent / "shared")


def pytest_configure(config):
    """Under pytest-xdist each worker gets a PostgreSQL database of its own (``<name>_gw0``, ...),
    created here before any test module reads H2MT_TEST_PG_URL: the storage tests drop and
    recreate their tables, which two workers sharing one database would do under each other."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    url = os.environ.get("H2MT_TEST_PG_URL")
    if not worker or not url:
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    base = make_url(url)
    name = f"{base.database}_{worker}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            if conn.scalar(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}) is None:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    os.environ["H2MT_TEST_PG_URL"] = base.set(database=name).render_as_string(hide_password=False)


# Fixtures whose tests take tens of seconds to minutes: the real backbone, a browser, an app or a
# reader server, a parsed corpus manual, the saved tiny model that CLI processes load.
HEAVY_FIXTURES = {"real_backbone", "browser", "explorer_server", "fresh_explorer_server",
                  "example_explorer", "served_reader", "corpus_tree", "shared_dir",
                  "tiny_model_dir", "etoolbox_text"}


def pytest_itemcollected(item):
    """Under pytest-xdist the tests on the shared app (``explorer_server``) are one xdist group,
    so that one worker starts it and indexes the manuals they upload (several upload the same
    ones), as one process does. (Marked as each test is collected: pytest-xdist reads the groups
    when the collection is modified.)"""
    if (os.environ.get("PYTEST_XDIST_WORKER") and "explorer_server" in item.fixturenames
            and not item.get_closest_marker("xdist_group")):
        item.add_marker(pytest.mark.xdist_group(EXPLORER_SERVER))


@pytest.hookimpl(trylast=True)  # after pytest-xdist's own naming of the groups
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist the heavy tests are handed out first (marked ``real_model`` or
    ``install``, or using a heavy fixture; otherwise in file order), so that the many short tests
    fill the gaps beside them instead of one worker finishing a long test alone at the end
    (longest first is the usual rule for spreading jobs over machines); with ``--dist
    loadgroup`` each test's xdist group is named in its id (``name_xdist_group``)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if config.getvalue("loadgroup"):
        for item in items:
            name_xdist_group(item)

    def light(item) -> bool:
        marked = item.get_closest_marker("real_model") or item.get_closest_marker("install")
        return not marked and not HEAVY_FIXTURES.intersection(item.fixturenames)
    items.sort(key=light)  # stable: file order kept within each group


def name_xdist_group(item) -> None:
    """The test's xdist groups as a suffix of its id (``path::test@group``), which is how
    pytest-xdist's scheduler reads them. pytest-xdist 3.8 writes that suffix into a field pytest
    9.2 no longer reads (pytest-dev/pytest-xdist#1386), so every test was scheduled alone and
    the tests of one group could start its costly fixture on each worker; the suffix is written
    here into the id pytest reads (once: not where pytest-xdist's own write took effect)."""
    groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                     for m in item.iter_markers("xdist_group")})
    if not groups or item.nodeid.endswith("@" + "_".join(groups)) or not hasattr(item, "_id"):
        return
    from _pytest.nodeid import NodeId

    item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not (SHARED / "corpus").is_dir():
        pytest.skip(f"shared corpus not found at {SHARED} (expected ../shared beside the repo)")
    return SHARED


@lru_cache(maxsize=None)
def _raw_tree(path: Path):
    from engine.document.builders import build_raw_tree

    return build_raw_tree(path)


@pytest.fixture(scope="session")
def corpus_tree(shared_dir):
    """corpus_tree("etoolbox-manual.pdf") -> its raw Tree, parsed once per test session."""
    def get(name: str):
        path = shared_dir / "corpus" / name
        if not path.exists():
            pytest.skip(f"{path} missing")
        return _raw_tree(path)
    return get

@pytest.fixture(scope="session")
def camlidl_cut(shared_dir, tmp_path_factory) -> Path:
    """camlidl's manual cut to its first 12 pages (tests/support/pdf_cut.py): the product's PDF
    path on a real manual with a fraction of its memories for the real backbone to write (the
    whole one's take most of two minutes on one core)."""
    from tests.support.pdf_cut import first_pages

    return first_pages(shared_dir / "corpus" / "camlidl-manual_no-outline.pdf", 12,
                       tmp_path_factory.mktemp("camlidl") / CAMLIDL_CUT)


CAMLIDL_CUT = "camlidl-1-12.pdf"  # the cut's file name, as uploads and the library show it

# -- models ------------------------------------------------------------------------------------
import pytest as _pytest


@_pytest.fixture(scope="session")
def real_tokenizer():
    """The default backbone's real tokenizer (from the dequantized cache; built on first use)."""
    from engine.memory.backbone import load_tokenizer
    from engine.settings import Settings

    return load_tokenizer(Settings())


@_pytest.fixture(scope="session")
def tiny_backbone(real_tokenizer):
    """A tiny randomly initialised Llama with the real tokenizer: seconds, not minutes."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from engine.memory.backbone import Backbone

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(real_tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, tie_word_embeddings=True)
    model = LlamaForCausalLM(config).eval().requires_grad_(False)
    return Backbone(model=model, tokenizer=real_tokenizer, name="tiny-llama-test",
                    device=torch.device("cpu"), dtype=torch.float32)


@_pytest.fixture(scope="session")
def tiny_parts(tiny_backbone):
    from engine.memory.parts import H2MTParts

    return H2MTParts(tiny_backbone.hidden_size, "mean").init_from_backbone(tiny_backbone)


@_pytest.fixture(scope="session")
def real_backbone():
    """The real SmolLM2-135M-Instruct (dequantized cache; about 5 s after the first time)."""
    from engine.memory.backbone import load_backbone
    from engine.settings import Settings

    return load_backbone(Settings())


@_pytest.fixture(scope="session")
def etoolbox_text(real_backbone, shared_dir, tmp_path_factory):
    """(runtime, doc id): etoolbox's manual through phase one (no memories) on a runtime of the
    real backbone and fresh parts, built once for the tests of the real reader's text answers on
    it, which only ask (unlogged). They carry the ``xdist_group`` mark ``ETOOLBOX_TEXT``, so
    one worker builds it."""
    from engine.ingest import ingest_file
    from tests.support.runtime import make_runtime

    rt = make_runtime(real_backbone, tmp_path_factory.mktemp("etoolbox-text"))
    try:
        yield rt, ingest_file(shared_dir / "corpus" / "etoolbox-manual.pdf", rt,
                              memories=False).doc_id
    finally:
        rt.library.close()


# The xdist group of the tests on ``etoolbox_text`` (``--dist loadgroup``: one worker).
ETOOLBOX_TEXT = "etoolbox_text"


# -- the app, served once per test session (browser and API tests share it) ----------------------

@contextlib.contextmanager
def serve_explorer(backbone, data: Path, examples: bool = False):
    """(url, runtime) of the explorer launched in-process on a SQLite library in ``data``
    (``examples``: with the example manual indexed in the background, as a visitor gets it)."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from app.shared.memory_writer import stop_memory_writer
    from app.ui import build_app, launch_app
    from engine.memory.parts import load_or_init_parts
    from engine.runtime import Runtime
    from engine.settings import Settings
    from storage import Library

    settings = Settings(data_dir=data)
    parts = load_or_init_parts(settings, backbone)  # what a user gets: the shipped parts
    rt = Runtime(settings, backbone, parts, Library(settings.database_url))
    demo = build_app(rt, examples=examples)
    port = free_port()
    launch_app(demo.queue(), prevent_thread_lock=True, server_name="127.0.0.1",
               server_port=port, quiet=True, mcp_server=settings.mcp)
    try:
        yield f"http://127.0.0.1:{port}/", rt
    finally:
        demo.close()
        stop_memory_writer(rt)
        rt.library.close()


@_pytest.fixture(scope="session")
def explorer_server(real_backbone, tmp_path_factory):
    """(url, runtime) of the explorer on a temporary library, shared by the session's tests
    (under pytest-xdist, one worker's: they are the xdist group ``EXPLORER_SERVER``)."""
    with serve_explorer(real_backbone, tmp_path_factory.mktemp("explorer")) as served:
        yield served


@_pytest.fixture(scope="session")
def example_explorer(real_backbone, tmp_path_factory):
    """(url, runtime) of the explorer on an empty data folder indexing its example manual, as a
    visitor gets it, shared by the session's first-screen browser tests (they carry the
    ``xdist_group`` mark ``EXAMPLE_EXPLORER``, so one worker starts it). Its memory writer is
    held for the whole session: the CPU goes to the answers, and the memory counts a page shows
    stay put while a test compares them."""
    from tests.support.memory_writer import hold_memory_writer

    with serve_explorer(real_backbone, tmp_path_factory.mktemp("examples"),
                        examples=True) as (url, rt), _pytest.MonkeyPatch.context() as patch:
        writer, gate = hold_memory_writer(rt, patch, HELD_S)
        try:
            yield url, rt
        finally:
            writer.worker.stop()  # the held write let go unwritten: the app closes at once


# The xdist group of the tests on ``example_explorer`` (``--dist loadgroup``: one worker).
EXAMPLE_EXPLORER = "example_explorer"
HELD_S = 3600  # the session's bound on holding the example app's memory writer


# The xdist group of the tests on ``explorer_server`` (given in pytest_itemcollected).
EXPLORER_SERVER = "explorer_server"


@_pytest.fixture
def fresh_explorer_server(real_backbone, tmp_path):
    """(url, runtime) of an explorer of its own on an empty library: what a newcomer starts
    from, untouched by the other tests' manuals, questions and events."""
    with serve_explorer(real_backbone, tmp_path / "explorer") as served:
        yield served


# -- a reader served over HTTP: `transformers serve` on the bundled backbone's cached folder ------

@_pytest.fixture(scope="session")
def served_reader(tmp_path_factory):
    """(base URL, model name) of ``transformers serve`` on a free local port, serving the
    dequantized backbone folder (nothing downloaded: HF_HUB_OFFLINE=1, an empty hub cache), and
    stopped at the end of the session."""
    import os
    import shutil
    import subprocess
    import sys
    import time
    import urllib.request

    from transformers.utils.import_utils import is_serve_available

    from engine.memory.backbone import resolve_backbone
    from engine.settings import Settings

    if not is_serve_available():
        _pytest.skip("transformers serve needs its serving extra: pip install -r "
                     "requirements-dev.txt (openai, fastapi, uvicorn)")
    cli = shutil.which("transformers", path=os.path.dirname(sys.executable))
    if cli is None:
        _pytest.skip(f"no transformers command beside {sys.executable}")
    folder, _, _ = resolve_backbone(Settings())  # the cached folder (config names its class)
    port = free_port()
    hub = tmp_path_factory.mktemp("hub-cache")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(hub), OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    log = open(tmp_path_factory.mktemp("served") / "serve.log", "w+")
    proc = subprocess.Popen([cli, "serve", str(folder), "--host", "127.0.0.1", "--port",
                             str(port), "--device", "cpu", "--dtype", "float32"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"transformers serve exited with {proc.returncode}: "
                                   f"{log.read()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("transformers serve did not answer /health within 180 s")
            time.sleep(0.5)
        yield f"{base}/v1", str(folder)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
