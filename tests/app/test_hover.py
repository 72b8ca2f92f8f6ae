"""The words of the routing figures: escaping, page labels, score names and node hovers."""
from __future__ import annotations

from app.views.hover import INDUCED_NOTE, channel_lines, esc, node_hover, pages_label, score_label
from engine.routing.router import RouteNode


def test_esc_cuts_then_escapes_and_folds_whitespace():
    assert esc('<b>A  "title"</b>\n') == "&lt;b&gt;A &quot;title&quot;&lt;/b&gt;"
    assert esc("abcdefgh", 5) == "abcd…" and esc(None) == ""


def test_pages_label():
    assert pages_label(None, None) == "—"
    assert pages_label(3, 3) == pages_label(3, None) == "p. 3"
    assert pages_label(3, 5) == "pp. 3–5"


def test_score_label_names_a_single_channel():
    assert score_label(None) == score_label("fused") == "fused score"
    assert score_label("lexical") == "score (words matched alone)"


def test_channel_lines_in_plain_words():
    lines = channel_lines({"lexical": {"own": 1.0, "subtree": 2.0},
                           "dense": {"own": None, "subtree": None}})
    assert lines == ["words matched: own 1.000, best in branch 2.000", "meaning: no evidence"]
    assert channel_lines(None) == []


def test_node_hover_says_status_pages_loops_and_induced():
    node = RouteNode(id=7, parent=0, doc_id=1, node_id=3, title="Arrays", depth=2,
                     page_start=4, page_end=6, score=0.25, prob=0.5, status="selected")
    node.induced = True
    hover = node_hover(node, [1, 0, 2], "fused score")
    for part in ("<b>Arrays</b>", "status: selected", "pages: pp. 4–6", "depth: 2",
                 INDUCED_NOTE, "fused score: 0.250", "probability in parent: 0.500",
                 "gate loops: 3 (L0: 1, L1: 0, L2: 2)", "node id: 7"):
        assert part in hover, part
    unscored = RouteNode(id=8, parent=7, doc_id=1, node_id=4, title="", depth=3,
                         page_start=None, page_end=None, score=None, prob=None,
                         status="unvisited")
    assert "not scored (the router never reached it)" in node_hover(unscored, [])
    assert "(untitled)" in node_hover(unscored, [])


def test_the_hover_says_why_a_branch_was_followed_or_left():
    from types import SimpleNamespace

    from app.views.figures import sibling_ranks
    from app.views.hover import branch_reason

    chans = {"lexical": {"own": 0.1, "subtree": 0.2}, "dense": {"own": 0.5, "subtree": 0.71}}
    kept = SimpleNamespace(id=1, parent=0, score=0.9, status="selected", channels=chans)
    left = SimpleNamespace(id=2, parent=0, score=0.4, status="pruned", channels={})
    root = SimpleNamespace(id=0, parent=None, score=None, status="root", channels={})
    place = sibling_ranks([root, kept, left])
    assert place == {1: (1, 2), 2: (2, 2)}
    assert branch_reason(kept, *place[1], "fused score") == (
        "why followed: 1 of 2 under its parent by fused score; strongest evidence: meaning (0.71)")
    assert branch_reason(left, *place[2]) == "why left: 2 of 2 under its parent by score"
    assert branch_reason(root, 1, 1) is None
