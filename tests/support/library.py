"""A library to test storage on: a temporary SQLite file, and PostgreSQL too when
H2MT_TEST_PG_URL names a throwaway database (``library``, its tables dropped before and after);
a small tree with every node field exercised (``sample_tree``), its document record
(``meta_for``) and routing evidence (``sample_evidence``)."""
from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest

from engine.document.tree import Tree, TreeAssembler
from storage import DocumentMeta, Library, NodeEvidence
from storage.models import Base

PG_URL = os.environ.get("H2MT_TEST_PG_URL")


@pytest.fixture(params=[
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.skipif(
        not PG_URL, reason="set H2MT_TEST_PG_URL to a throwaway PostgreSQL database to run")),
])
def library(request, tmp_path):
    if request.param == "sqlite":
        lib = Library(f"sqlite:///{tmp_path / 'nested' / 'library.sqlite3'}")
        yield lib
        lib.close()
        return
    lib = Library(PG_URL)
    Base.metadata.drop_all(lib.engine)
    Base.metadata.create_all(lib.engine)
    yield lib
    Base.metadata.drop_all(lib.engine)
    lib.close()


def sample_tree(title: str = "Pump manual") -> Tree:
    """A small tree with every Node field exercised (pages, refs, kinds, unicode, None values)."""
    asm = TreeAssembler("outline", title, pages=12, root_text="Front matter.")
    intro = asm.add(0, title="1 Introduction", text="Read this first.", page_start=1, page_end=2)
    asm.add(intro, title="", text="Safety: wear gloves — always.", page_start=1, page_end=1,
            kind="paragraph")
    asm.add(intro, title="1.1 Scope", text="", page_start=2, page_end=2)
    ops = asm.add(0, title="2 Opération", text="Überblick ✓", page_start=3, page_end=12)
    start = asm.add(ops, title="2.1 Start", text="Press the green button.\n\nWait.",
                    page_start=3, page_end=4, ref="chunk-17")
    asm.add(start, title="", text="x" * 5000, kind="chunk")
    asm.add(0, title="Appendix", text="No pages here.", kind="front")
    tree = asm.finish()
    for nid in tree.graph.nodes:  # token counts normally come from split_long_nodes
        node = tree.node(nid)
        tree.graph.nodes[nid]["node"] = replace(node, tokens=3 * nid + 1)
    tree.validate()
    return tree


def meta_for(tree: Tree, sha: str = "a" * 64) -> DocumentMeta:
    return DocumentMeta(title=tree.title, file_name="manual.pdf", sha256=sha, pages=tree.pages,
                        tree_ms=12.5, memory_ms=40.25)


def sample_evidence(tree: Tree, fingerprint: str = "lex:1|dense:test", dim: int = 4):
    """Routing evidence of every node of ``tree`` (random vectors, fixed words)."""
    rng = np.random.default_rng(0)
    tokens = [[] if i == 0 else [f"w{i}", "pump", "\\patchcmd"] for i in range(len(tree))]
    dense = rng.standard_normal((len(tree), dim)).astype(np.float32)
    dense[0] = 0
    return NodeEvidence(tokens=tokens, dense=dense, fingerprint=fingerprint)
