"""The engine end to end on PostgreSQL: ingest a Markdown manual, ask about it, sweep leftovers.

Needs H2MT_TEST_PG_URL (a throwaway database; its tables are dropped before and after).
scripts/test.sh starts a temporary PostgreSQL server and sets it when PostgreSQL is installed
(installing it first when running as root); otherwise these tests skip and say why. The storage
tests (tests/test_storage.py) and the engine concurrency tests (tests/test_concurrency.py) run
on the same server.
"""
from __future__ import annotations

import os

import pytest

PG_URL = os.environ.get("H2MT_TEST_PG_URL")
pytestmark = pytest.mark.skipif(
    not PG_URL, reason="H2MT_TEST_PG_URL is not set: no PostgreSQL server (scripts/test.sh "
                       "starts one when PostgreSQL is installed)")


@pytest.fixture
def pg_runtime(tiny_backbone, tiny_parts, tmp_path):
    from engine.runtime import Runtime
    from engine.settings import Settings
    from storage import Library
    from storage.models import Base

    lib = Library(PG_URL)
    Base.metadata.drop_all(lib.engine)
    lib.close()
    settings = Settings(data_dir=tmp_path, db_url=PG_URL)
    rt = Runtime(settings, tiny_backbone, tiny_parts, Library(PG_URL))
    yield rt
    Base.metadata.drop_all(rt.library.engine)
    rt.library.close()


def test_ingest_and_ask_on_postgresql(pg_runtime, tmp_path):
    from engine.ask import AskOptions, ask
    from engine.ingest import ingest_file

    rt = pg_runtime
    assert rt.library.engine.dialect.name == "postgresql"
    md = tmp_path / "pump.md"
    md.write_text("# Pump\n\nIntro.\n\n## Setup\n\nOpen the valve, then start the motor.\n\n"
                  "## Faults\n\nE1 means the valve is closed.\n")
    r = ingest_file(md, rt)
    assert not r.reused and r.nodes >= 3
    again = ingest_file(md, rt)
    assert again.reused and again.doc_id == r.doc_id
    tree = rt.library.get_tree(r.doc_id)
    assert [n.title for n in tree.preorder()][-2:] == ["Setup", "Faults"]
    for mode in ("memory", "text", "route"):
        a = ask(rt, r.doc_id, "What does E1 mean?", AskOptions(mode=mode, max_new_tokens=4))
        assert a.route is not None or mode == "full"
    assert len(rt.library.list_queries(r.doc_id)) == 3
    # Routing evidence stored on PostgreSQL: the words-matched router finds the faults section.
    for router in ("lexical", "fused"):
        a = ask(rt, r.doc_id, "What does the E1 fault mean?",
                AskOptions(mode="route", router=router, k=1))
        assert "Faults" in [rt.library.get_tree(r.doc_id).node(a.route.tree.origin[i][1]).title
                            for i in a.route.selected], router
        assert a.route.node_channels(a.route.selected[-1])["lexical"]["own"] > 0
    rt.library.delete_document(r.doc_id)
    assert rt.library.list_documents() == []


def test_recover_on_postgresql(pg_runtime):
    from storage import Library

    assert Library(PG_URL).recovered == {"memories": 0, "evidence": 0, "nodes": 0, "documents": 0}


def test_replicas_opening_a_new_database_at_once_all_open():
    """Several processes (here threads, each on its own connection) opening one empty
    PostgreSQL database at the same moment: one creates the tables, the others wait for it."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from storage import Library
    from storage.models import Base

    lib = Library(PG_URL)
    Base.metadata.drop_all(lib.engine)
    lib.close()
    barrier = threading.Barrier(6)

    def open_library():
        barrier.wait()
        Library(PG_URL).close()

    try:
        with ThreadPoolExecutor(6) as pool:
            for f in [pool.submit(open_library) for _ in range(6)]:
                f.result()
    finally:
        lib = Library(PG_URL)
        Base.metadata.drop_all(lib.engine)
        lib.close()
