"""What the passage tests share: a big real manual's tree, built once a session."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def gmsh_tree(real_tokenizer):
    """The Gmsh reference manual (390 pages, a dev-probe manual from the gmsh-doc package),
    its tree built as ingest builds it; fetched with apt-get when missing (skipped where that
    fails)."""
    return _probe_manual_tree("gmsh", real_tokenizer)


@pytest.fixture(scope="session")
def scons_tree(real_tokenizer):
    """The SCons user guide (351 pages, a dev-probe manual from the scons-doc package), its tree
    built as ingest builds it; fetched with apt-get when missing (skipped where that fails)."""
    return _probe_manual_tree("scons", real_tokenizer)


def _probe_manual_tree(key: str, tok):
    """A dev-probe manual's tree (``bench.probe_set``'s manual ``key``), built as ingest builds
    it; fetched with apt-get when missing (the test skipped where that fails)."""
    from bench.probe_set import load_manuals, manual_pdf
    from engine.document.build import build_tree

    try:
        pdf = manual_pdf(load_manuals()[key])
    except Exception as e:  # no package index here: nothing to read
        pytest.skip(f"{key}'s manual not available: {e}")
    return build_tree(pdf, lambda t: tok.encode(t, add_special_tokens=False), tok.decode, 256)
