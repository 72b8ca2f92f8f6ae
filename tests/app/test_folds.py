"""Contents and index pages folded (app/views/folds.py): one row of the Library tab's outline and
one marker of the routing tree per run, on real manuals and on hand-made trees and routes. Nothing
of the stored tree, its kinds or routing changes: only the views."""
from __future__ import annotations

import json

import pytest

from app.library.outline import outline_rows
from app.views.figures import figure_summary, route_figure
from app.views.folds import FOLD_MARK, MAX_GAP, contents_folds, fold_text, route_folds
from app.views.visible_tree import fold_marker_id, marker_id, visible_tree
from engine.document.tree import ROOT, TreeAssembler
from tests.support.routes import make_route


@pytest.fixture(scope="module")
def built(shared_dir, real_tokenizer):
    """build_tree of a corpus manual, as ingest stores it (split at 256 tokens, hygiene)."""
    from engine.document.build import build_tree

    enc = lambda t: real_tokenizer.encode(t, add_special_tokens=False)  # noqa: E731
    dec = lambda ids: real_tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    return lambda name: build_tree(shared_dir / "corpus" / name, enc, dec, 256)


def _title(row) -> str:
    return str(row[1]).lstrip("\u00a0")


def test_why3_outline_reaches_chapter_one_at_once(built):
    """why3's contents pages are 49 pieces under "Front matter" (split between sentences since
    entries, issue 54): the outline used to list them
    one a row; now one row says what they hold, and the Foreword (chapter 1) is the sixth row.
    The bibliography's pieces (marked "index" by hygiene) are one row too."""
    tree = built("why3-manual.pdf")
    kinds_before = [n.kind for n in tree.preorder()]
    rows = outline_rows(tree)
    titles = [_title(r) for r in rows]
    assert titles[:6] == ["Why3 Documentation", "Front matter", "Front matter › part 1 of 49",
                          f"{FOLD_MARK}Contents (pp. 1–8, 47 parts)",
                          "Front matter › part 49 of 49", "Foreword"], titles[:8]
    assert not any("part 2 of 49" in t for t in titles)
    folded = [r for r in rows if _title(r).startswith(FOLD_MARK)]
    assert [(_title(r), r[4]) for r in folded] == [
        (f"{FOLD_MARK}Contents (pp. 1–8, 47 parts)", "toc"),
        (f"{FOLD_MARK}Index (pp. 175–184, 48 parts)", "index")]
    folds = contents_folds(tree)
    # every node is in the outline once: a row, or one of the nodes a fold row stands for
    assert len(rows) + sum(len(f.ids) - 1 for f in folds) == len(tree)
    assert [r[0] for r in folded] == [f.first for f in folds]
    # a fold's row gives its first node and the tokens of all of them; every node folded is a
    # contents / index node or an untitled leaf between two of them
    contents = folds[0]
    assert folded[0][3] == sum(tree.node(i).tokens for i in contents.ids)
    assert {tree.node(i).kind for i in contents.ids} <= {"toc", "paragraph", "titlepage"}
    assert sum(tree.node(i).kind == "toc" for i in contents.ids) == 45
    assert all(not tree.node(i).title and not tree.children(i) for i in contents.ids
               if tree.node(i).kind != "toc")
    # selecting the row reads the pages it holds
    text = fold_text(tree, contents)
    assert "2.1 Hello Proofs" in text and "Bibliography 169" in text
    assert [n.kind for n in tree.preorder()] == kinds_before  # the tree is not changed


def test_small_contents_and_top_level_sections_fold(built):
    """etoolbox's two contents pieces, and r-intro's two index sections side by side under the
    root (whole subtrees marked "index"): one row each."""
    etoolbox = built("etoolbox-manual.pdf")
    assert [f.title for f in contents_folds(etoolbox)] == ["Contents (p. 1, 2 parts)"]
    r_intro = built("r-intro.pdf")
    folds = contents_folds(r_intro)
    index = next(f for f in folds if f.kind == "index")
    assert index.parent == ROOT and len(index.members) == 2
    assert all(r_intro.node(m).title for m in index.members)  # titled sections, whole
    assert len(index.ids) > len(index.members)
    rows = outline_rows(r_intro)
    assert len(rows) + sum(len(f.ids) - 1 for f in folds) == len(r_intro)


def _tree(spec):
    """A hand-made tree: spec = [(parent, title, kind)], ids from 1 in order."""
    asm = TreeAssembler("markdown", "Manual")
    for parent, title, kind in spec:
        asm.add(parent, title=title, text=f"text of {title or 'a piece'}", page_start=1,
                page_end=2, kind=kind)
    return asm.finish()


def test_runs_take_short_gaps_and_stop_at_sections():
    gap = [(1, "", "paragraph")] * MAX_GAP
    tree = _tree([(ROOT, "Front", "front"), (1, "", "toc"), *gap, (1, "", "toc"),
                  (1, "", "paragraph"), (1, "Intro", "section"), (1, "", "toc"),
                  (ROOT, "Chapter", "section"), (7 + MAX_GAP, "", "index"),
                  (7 + MAX_GAP, "", "toc")])
    folds = contents_folds(tree)
    # the first run holds the gap, not the trailing paragraph; a lone marked leaf is not
    # folded; an index piece next to a contents piece are two runs of one node each: neither
    assert [(f.kind, f.members) for f in folds] == [
        ("toc", tuple(range(2, 4 + MAX_GAP)))]
    assert folds[0].title == f"Contents (pp. 1–2, {MAX_GAP + 2} parts)"
    longer = _tree([(ROOT, "Front", "front"), (1, "", "toc"),
                    *[(1, "", "paragraph")] * (MAX_GAP + 1), (1, "", "toc")])
    assert contents_folds(longer) == []  # too long a gap: prose between two contents pieces


def test_routing_tree_draws_a_pruned_run_as_one_marker():
    """Root 0 -> 1 (selected), 2..5 (a run of four, pruned), 6 (pruned); 2 has two unvisited
    children 7, 8. The run is one marker standing for six nodes; the totals stay whole."""
    from app.views.folds import Fold

    parents = [None, 0, 0, 0, 0, 0, 0, 2, 2]
    status = {0: "root", 1: "selected", 2: "pruned", 3: "pruned", 4: "pruned", 5: "pruned",
              6: "pruned"}
    route = make_route(parents, status)
    fold = Fold("toc", 0, (2, 3, 4, 5), (2, 7, 8, 3, 4, 5), 1, 4)
    vt = visible_tree(route, [fold])
    m = fold_marker_id(2, len(parents))
    assert vt.children[0] == [1, m, 6]
    assert vt.folded == {m: (0, 6, "Contents (pp. 1–4, 6 parts)")}
    assert marker_id(2) not in vt.collapsed and 2 not in vt.visible
    fig = route_figure(route, folds=[fold])
    s = figure_summary(fig)
    assert s["nodes"] == {"root": 1, "selected": 1, "pruned": 1}
    assert (s["folded_markers"], s["folded_nodes"]) == (1, 6)
    assert s["represented_nodes"] == s["total_nodes"] == len(parents)
    assert figure_summary(json.loads(fig.to_json())) == s
    trace = next(t for t in fig.data if (t.meta or {}).get("status") == "folded")
    assert list(trace.text) == ["Contents"] and "6 parts" in trace.hovertext[0]
    # a run with a selected node is drawn as it is; without folds nothing changes
    status[3] = "selected"
    route = make_route(parents, status)
    assert visible_tree(route, [fold]).folded == {}
    plain = figure_summary(route_figure(route))
    assert plain["folded_markers"] == 0 and not any(
        (t.meta or {}).get("status") == "folded" for t in route_figure(route).data)


def test_route_folds_map_each_manual_into_the_library_route(built):
    """A library-wide route offsets every manual's ids under a virtual root: the folds follow."""
    from engine.routing.router import Route, RoutingTree, Walked, WalkLimits

    etoolbox = built("etoolbox-manual.pdf")
    routing = RoutingTree.from_library({7: (etoolbox, None), 9: (etoolbox, None)})
    route = Route(routing, Walked({}, {}, {}, [], "leaves"), WalkLimits(k=3))
    folds = route_folds(route, {7: etoolbox, 9: etoolbox})
    assert len(folds) == 2
    for f in folds:
        assert [(route.nodes[i].node_id) for i in f.ids] == list(contents_folds(etoolbox)[0].ids)
    assert folds[0].members != folds[1].members
