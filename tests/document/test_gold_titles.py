"""Every gold (title, page) of the manual QA dev set maps to exactly one tree node."""
from __future__ import annotations

import json

import pytest


def _gold(shared_dir):
    path = shared_dir / "bench" / "manuals" / "dev_qa.jsonl"
    if not path.exists():
        pytest.skip(f"{path} missing")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def test_gold_entries_map_to_one_node(shared_dir, corpus_tree):
    items = _gold(shared_dir)
    assert len(items) == 48
    for item in items:
        tree = corpus_tree(item["doc"])
        for gold in item["gold"]:
            hits = [n for n in tree.preorder()
                    if n.title == gold["title"] and n.page_start == gold["page"]]
            assert len(hits) == 1, (item["id"], gold)
            n = hits[0]
            assert n.page_start <= item["evidence_page"] or n.page_end >= item["evidence_page"]
