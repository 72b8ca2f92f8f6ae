"""ORD-QA documentation JSON: source -> chunk (ref = chunk id) -> headings inside a chunk."""
from __future__ import annotations

import json

import pytest

from engine.document.builders import build_raw_tree
from engine.document.tree import DocumentError


@pytest.fixture(scope="module")
def ordqa(shared_dir):
    path = shared_dir / "bench" / "ordqa" / "openroad_documentation.json"
    if not path.exists():
        pytest.skip(f"{path} missing")
    return build_raw_tree(path), json.loads(path.read_text(encoding="utf-8"))


def test_sources_and_chunks(ordqa):
    tree, data = ordqa
    assert tree.source == "json"
    sources = tree.children(0)
    assert [s.title for s in sources] == [d["source"] for d in data]
    assert len(sources) == 32
    chunks = [n for n in tree.preorder() if n.ref is not None]
    assert len(chunks) == 290
    want = {k["id"]: k["content"] for d in data for k in d["knowledge"]}
    assert [c.ref for c in chunks] == list(want)
    for c in chunks:
        assert c.kind == "chunk" and tree.parent(c.id).depth == 1
        assert not c.text.startswith("id:")


def test_chunk_titles_skip_breadcrumbs(ordqa):
    tree, _ = ordqa
    by_ref = {n.ref: n for n in tree.preorder() if n.ref}
    assert by_ref["install_2"].title == "Build Manually"
    assert by_ref["flow-scripts-tutorial_13"].title == "Timing"
    assert by_ref["global_routing_6"].title == "Set Routing Alpha"
    # Later headings of a chunk are its children, whatever their level.
    kids = [k.title for k in tree.children(by_ref["global_routing_6"].id)]
    assert "Commands" in kids


def test_other_json_is_refused(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(DocumentError, match="unsupported JSON"):
        build_raw_tree(path)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(DocumentError, match="not valid JSON"):
        build_raw_tree(path)
