"""Layout and figures on hand-made routes (no model, no database)."""
from __future__ import annotations

import json

from app.views.figures import figure_summary, route_figure
from app.views.icicle import manual_figure
from app.views.layout import tidy_layout
from app.views.route_tables import route_rows
from app.views.visible_tree import marker_id, visible_tree
from engine.answer.response import Answer, Generation, Metrics
from engine.answer.request import Passages
from engine.routing.router import Found, Route, Walked, WalkLimits
from tests.support.routes import PARENTS, STATUS, make_route


def test_tidy_layout_orders_leaves_and_centres_parents():
    children = {0: [1, 2], 1: [3, 4], 2: [5]}
    pos = tidy_layout(children)
    assert [pos[i][0] for i in (3, 4, 5)] == [0.0, 1.0, 2.0]
    assert pos[1] == (0.5, -1.0)
    assert pos[2] == (2.0, -1.0)
    assert pos[0] == (1.25, 0.0)
    assert pos[3][1] == -2.0


def test_tidy_layout_deep_chain_has_no_recursion_limit():
    n = 5000
    children = {i: [i + 1] for i in range(n - 1)}
    pos = tidy_layout(children)
    assert len(pos) == n and pos[n - 1] == (0.0, -(n - 1.0))


def test_visible_tree_collapses_each_unvisited_subtree_into_one_marker():
    route = make_route(PARENTS, STATUS)
    vt = visible_tree(route)
    assert sorted(vt.visible) == sorted(STATUS)
    assert vt.collapsed == {marker_id(3): (3, 3), marker_id(4): (4, 2), marker_id(6): (6, 1)}
    assert vt.children[3] == [marker_id(3)]


def test_route_figure_counts_by_status():
    route = make_route(PARENTS, STATUS)
    fig = route_figure(route)
    s = figure_summary(fig)
    assert s["nodes"] == {"root": 1, "selected": 4, "pruned": 3}
    assert s["collapsed_markers"] == 3
    assert sorted(s["collapsed_counts"]) == [1, 2, 3]
    assert s["represented_nodes"] == s["total_nodes"] == len(PARENTS)
    assert s["colorbar"] is True
    # the JSON round trip gives the same summary (what the browser receives)
    assert figure_summary(json.loads(fig.to_json())) == s


def test_collapsed_marker_labels_show_counts():
    fig = route_figure(make_route(PARENTS, STATUS))
    (tr,) = [t for t in fig.data if (t.meta or {}).get("status") == "collapsed"]
    assert sorted(tr.text) == ["+1", "+2", "+3"]


def test_selected_path_bold_and_pruned_dashed():
    fig = route_figure(make_route(PARENTS, STATUS))
    edges = {t.name: t for t in fig.data if (t.meta or {}).get("kind") == "edges"}
    assert edges["selected path"].line.width > edges["edges: pruned"].line.width
    assert edges["edges: pruned"].line.dash == "dash"
    # 4 selected edges, 3 pruned edges, 3 collapsed edges (x0, x1, None per edge)
    assert len(edges["selected path"].x) == 3 * 4
    assert len(edges["edges: pruned"].x) == 3 * 3
    assert len(edges["edges: collapsed"].x) == 3 * 3


def test_titles_are_escaped_in_hover_and_labels():
    evil = '<script>alert("x")</script> & <b>bold</b>'
    route = make_route(PARENTS, STATUS, titles={1: evil, 3: evil, 0: evil})
    fig = route_figure(route)
    text = fig.to_json()
    assert "<script>" not in text and "<b>bold" not in text
    assert "&lt;script&gt;" in text
    icicle = manual_figure(route).to_json()
    assert "<script>" not in icicle and "&lt;script&gt;" in icicle


def test_gate_loops_on_selected_nodes():
    route = make_route(PARENTS, STATUS)
    answer = Answer(text="", mode="memory", cited=[], metrics=Metrics(), route=route,
                    generation=Generation(gate={4: [1, 0, 2], 6: [0, 0, 0]}))
    fig = route_figure(route, answer)
    (sel,) = [t for t in fig.data if (t.meta or {}).get("status") == "selected"]
    idx = [row[0] for row in sel.customdata].index(4)
    assert "⟳3" in sel.text[idx]
    assert "L0: 1, L1: 0, L2: 2" in sel.hovertext[idx]
    assert sel.marker.size[idx] > sel.marker.size[[row[0] for row in sel.customdata].index(1)]


def test_route_rows_selected_first():
    rows = route_rows(make_route(PARENTS, STATUS))
    statuses = [r[0] for r in rows]
    assert statuses == ["root"] + ["selected"] * 4 + ["pruned"] * 3


def test_large_tree_draws_only_scored_nodes():
    # 1 root, 20 chapters, 40 leaves under each: 821 nodes; 3 chapters selected, 17 pruned
    parents: list[int | None] = [None] + [0] * 20
    for ch in range(1, 21):
        parents += [ch] * 40
    status = {0: "root", **{i: "pruned" for i in range(1, 21)}}
    status.update({1: "selected", 5: "selected", 9: "selected"})
    route = make_route(parents, status, k=3)
    s = figure_summary(route_figure(route))
    assert s["drawn_nodes"] == 21
    assert s["collapsed_markers"] == 20 and set(s["collapsed_counts"]) == {40}
    assert s["represented_nodes"] == len(parents) == 821


# -- evidence channels in the hover, and the fused/memory disagreement view --------------------

def make_channel_route(parents, status, router="fused", with_memory=True, alternatives=None,
                       k: int = 2) -> Route:
    """make_route with per-channel scores: lexical own = id, dense own = id / 100, memory own =
    -id; the root (no evidence) has NaN own scores; subtree = max over the subtree."""
    import numpy as np

    from engine.routing.channels import ChannelScores, TreeLevels

    base = make_route(parents, status, k=k)
    n = len(parents)
    levels = TreeLevels(list(parents), base.tree.depth)
    ids = np.arange(n, dtype=np.float32)
    owns = {"lexical": ids.copy(), "dense": ids / 100, "memory": -ids}
    if not with_memory:
        owns.pop("memory")
    chans = {}
    for name, own in owns.items():
        own[0] = np.nan
        chans[name] = ChannelScores(own=own, subtree=(own.copy() if name == "memory"
                                                     else levels.propagate_max(own)))
    route = Route(base.tree, Walked(base.scores, base.probs, base.visits, base.selected,
                                    "leaves"), WalkLimits(k=k), Found(router, channels=chans))
    route.alternatives.update(alternatives or {})
    return route


def _hover_of(fig, rid: int) -> str:
    for t in fig.data:
        if (t.meta or {}).get("status") in ("root", "selected", "pruned"):
            ids = [row[0] for row in t.customdata]
            if rid in ids:
                return t.hovertext[ids.index(rid)]
    raise KeyError(rid)


def test_hover_lists_each_channel_in_plain_words_with_own_and_branch_scores():
    route = make_channel_route(PARENTS, STATUS)
    fig = route_figure(route)
    h = _hover_of(fig, 1)  # node 1: lexical own 1, best in its branch (4, 5, 9, 10) = 10
    assert "fused score: 0.100" in h
    assert "words matched: own 1.000, best in branch 10.000" in h
    assert "meaning: own 0.010, best in branch 0.100" in h
    assert "memory: own -1.000, best in branch -1.000" in h
    assert "lexical" not in h and "dense" not in h  # plain words only
    root = _hover_of(fig, 0)
    assert "not scored" in root
    assert fig.layout.coloraxis.colorbar.title.text == "fused score"
    # the whole-manual icicle says which nodes were never scored
    ice = manual_figure(route).data[0]
    assert "not scored (the router never reached it)" in ice.hovertext[13]
    assert "words matched: own 4.000" in ice.hovertext[4]


def test_hover_of_a_single_channel_router_names_the_channel():
    route = make_channel_route(PARENTS, STATUS, router="lexical")
    fig = route_figure(route)
    assert "score (words matched alone): 0.100" in _hover_of(fig, 1)
    assert fig.layout.coloraxis.colorbar.title.text == "score (words matched alone)"


def test_missing_channel_and_no_evidence_are_said_so():
    route = make_channel_route(PARENTS, STATUS, with_memory=False)
    route.channels["lexical"].own[1] = float("nan")
    route.channels["lexical"].subtree[1] = float("nan")
    h = _hover_of(route_figure(route), 1)
    assert "memory:" not in h
    assert "words matched: no evidence" in h


def test_route_rows_carry_each_channel_branch_score():
    from app.views.route_tables import ROUTE_COLUMNS

    rows = route_rows(make_channel_route(PARENTS, STATUS))
    by_id = {r[ROUTE_COLUMNS.index("id")]: r for r in rows}
    assert by_id[1][ROUTE_COLUMNS.index("words matched")] == 10.0
    assert by_id[1][ROUTE_COLUMNS.index("memory")] == -1.0
    assert by_id[0][ROUTE_COLUMNS.index("meaning")] is None  # the root is not scored


def test_router_agreement_counts_and_rows():
    from app.shared.lines import ALL_CLUES_COL, MEMORIES_COL
    from app.views.route_tables import (AGREEMENT_COLUMNS, agreement_rows, agreement_summary,
                                        router_agreement)

    # fused selected 1, 2, 4, 6; the memory router would have selected 1, 3, 4, 8
    route = make_channel_route(PARENTS, STATUS, alternatives={"memory": [1, 3, 4, 8]})
    ag = router_agreement(route)
    assert ag.counts() == {"both": 2, "fused_only": 2, "memory_only": 2}
    assert agreement_summary(ag).startswith("both: 2, fused only: 2, memory only: 2")
    rows = agreement_rows(route, ag)
    col = {c: AGREEMENT_COLUMNS.index(c) for c in AGREEMENT_COLUMNS}
    assert [r[col["id"]] for r in rows] == [2, 3, 6, 8]
    assert [(r[col[ALL_CLUES_COL]], r[col[MEMORIES_COL]]) for r in rows] == [
        ("selected", "—"), ("—", "selected"), ("selected", "—"), ("—", "selected")]
    assert rows[1][col["title"]].endswith("Section 3") and rows[1][col["pages"]] == "pp. 4–5"
    # routed by memory: the fused selection is the alternative
    mem = make_channel_route(PARENTS, STATUS, router="memory", alternatives={"fused": [1, 2]})
    assert router_agreement(mem).counts() == {"both": 2, "fused_only": 0, "memory_only": 2}
    # a lexical route knows both alternatives
    lex = make_channel_route(PARENTS, STATUS, router="lexical",
                             alternatives={"fused": [1, 2], "memory": [1, 2]})
    ag = router_agreement(lex)
    assert ag.counts() == {"both": 2, "fused_only": 0, "memory_only": 0}
    assert "same sections" in agreement_summary(ag)


def test_router_agreement_without_memories_says_why():
    from app.views.route_tables import agreement_rows, agreement_summary, router_agreement

    route = make_channel_route(PARENTS, STATUS, with_memory=False)  # no memory alternative
    assert router_agreement(route) is None
    assert agreement_rows(route, None) == []
    msg = "finding sections by their memories waits for them (3/14 written)"
    assert agreement_summary(None, msg) == msg


def test_figures_of_thousands_of_nodes_are_whole():
    """A 4051-node route: the tree, the icicle and the table each hold every node they should
    (their drawing time is a speed goal, measured by bench/tree_draw.py, not asserted here: a
    wall-clock bound failed a clean run on a loaded machine, 2.5 s against 1.0)."""
    # 1 root, 50 chapters, 80 leaves each: 4051 nodes; every chapter and every leaf of three
    # chapters scored
    parents: list[int | None] = [None] + [0] * 50
    for ch in range(1, 51):
        parents += [ch] * 80
    status = {0: "root", **{i: "pruned" for i in range(1, 51)}}
    for ch in (1, 2, 3):
        status[ch] = "selected"
        first = 51 + (ch - 1) * 80
        status.update({i: "pruned" for i in range(first, first + 80)})
        status[first] = "selected"
    route = make_channel_route(parents, status, alternatives={"memory": [1, 2, 4]}, k=3)
    fig = route_figure(route)
    ice = manual_figure(route)
    rows = route_rows(route)
    assert len(ice.data[0].hovertext) == len(parents) == 4051
    assert len(rows) == 1 + 50 + 240
    assert figure_summary(fig)["represented_nodes"] == 4051


def test_single_channel_route_has_nothing_to_compare():
    from app.views.route_tables import router_agreement, single_channel, single_channel_reason

    # a lexical route that carries only its own channel: its "fused" alternative is lexical
    route = make_channel_route(PARENTS, STATUS, router="lexical", alternatives={"fused": [1, 2]})
    for name in ("dense", "memory"):
        route.channels.pop(name)
    assert single_channel(route) and router_agreement(route) is None
    assert "words matched router scored only its own evidence" in single_channel_reason(route)


def test_induced_parents_are_marked_and_survive_the_query_log():
    route = make_route(PARENTS, STATUS)
    route.tree.induced = [i in (1, 3, 4) for i in range(len(PARENTS))]  # guessed parents
    fig = route_figure(route)
    drawn = {}
    for t in fig.data:
        if (t.meta or {}).get("status") in ("selected", "pruned"):
            for row, symbol, hover in zip(t.customdata, t.marker.symbol, t.hovertext):
                drawn[row[0]] = (symbol, "induced" in hover)
    assert drawn[1] == drawn[3] == drawn[4] == ("diamond", True)
    assert drawn[2] == drawn[5] == ("circle", False)
    assert fig.layout.meta["induced_drawn"] == 3
    back = Route.from_records(route.as_records())
    assert [n.induced for n in back.nodes] == route.tree.induced


def test_pruned_branch_that_held_a_strong_hit_is_ringed():
    """A pruned chapter whose section is among the best by own evidence is marked in the
    figure data (and nothing is marked without own scores, e.g. a route from the query log)."""
    import numpy as np

    route = make_route(PARENTS, STATUS)
    assert figure_summary(route_figure(route))["strong_pruned"] == []
    # own evidence: node 12 (unvisited, under the pruned 3) is the best section, node 9
    # (unvisited, under the selected 4) second, node 7 (pruned itself) third
    pack = np.full(len(PARENTS), np.nan, np.float32)  # no evidence elsewhere
    pack[12], pack[9], pack[7] = 5.0, 4.0, 3.0
    route.pack_scores = pack
    fig = route_figure(route)
    summ = figure_summary(fig)
    assert summ["strong_pruned"] == [3, 7]  # 9's branch was kept: only its node went unscored
    ring = next(t for t in fig.data if (t.meta or {}).get("kind") == "strong-pruned")
    assert [row[4] for row in ring.customdata] == [1, 3]  # the best rank each branch held
    assert "Section 12" in ring.hovertext[0] and "#1 best" in ring.hovertext[0]
    assert summ["nodes"]["pruned"] == 3  # still drawn as pruned beneath the ring


def test_the_quotes_section_is_starred_and_an_undrawn_one_marks_its_ancestor():
    """The routing view marks the node the quote came from; a quote the flat BM25 found in a
    section the walk never drew (9, unvisited below 4) stars its nearest drawn ancestor."""
    from engine.answer.passages.quote import Quote

    route = make_route(PARENTS, STATUS)
    for rid, at, channel in ((6, 6, "routed section"), (9, 4, "flat BM25")):
        quote = Quote(text="Some words of the manual.", doc_id=1, node_id=rid, heading="H",
                      page=1, score=0.9, rid=rid, channel=channel)
        answer = Answer(text="", mode="quote", cited=[], metrics=Metrics(), route=route,
                        passages=Passages(quote=quote))
        (star,) = [t for t in route_figure(route, answer).data if (t.meta or {}).get("kind") == "quote"]
        assert star.customdata[0][0] == rid and channel in star.hovertext[0]
        drawn = {row[0] for t in route_figure(route).data if t.customdata is not None
                 for row in t.customdata}
        assert at in drawn and (rid == at) == ("not drawn" not in star.hovertext[0])


def test_hovers_give_printed_page_labels_where_the_manual_has_them():
    import networkx as nx

    from storage.tree import Tree

    route = make_channel_route(PARENTS, STATUS)  # node 1 of manual 1 spans PDF pages 2-3
    labelled = Tree(nx.DiGraph(), "outline", page_labels=("i", "ii", "1", "2"))
    assert "pages: pp. ii–1 (PDF pages 2–3)" in _hover_of(route_figure(route, trees={1: labelled}), 1)
    assert "pages: pp. 2–3" in _hover_of(route_figure(route), 1)  # no tree: physical numbers
    assert "pages: pp. 2–3" in _hover_of(route_figure(route, trees={2: labelled}), 1)  # not its manual
