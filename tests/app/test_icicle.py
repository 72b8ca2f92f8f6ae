"""The whole manual as an icicle, on hand-made routes (no model, no database)."""
from __future__ import annotations

from app.views.figures import ROOT_FILL, UNVISITED_FILL
from app.views.icicle import manual_figure
from tests.support.routes import PARENTS, STATUS, make_route


def test_manual_icicle_has_every_node_and_a_colorbar():
    route = make_route(PARENTS, STATUS)
    fig = manual_figure(route)
    ice = fig.data[0]
    assert len(ice.ids) == len(PARENTS)
    assert any(t.marker.showscale for t in fig.data[1:])


def test_unscored_nodes_are_grey_and_selected_ones_outlined():
    route = make_route(PARENTS, STATUS)
    ice = manual_figure(route).data[0]
    colors, widths = ice.marker.colors, ice.marker.line.width
    assert colors[0] == ROOT_FILL
    assert all(colors[i] == UNVISITED_FILL for i in range(len(PARENTS)) if i not in STATUS)
    assert all(colors[i] not in (ROOT_FILL, UNVISITED_FILL) for i in (1, 3, 5))
    assert widths[1] == 3 and widths[3] == 0.5


def test_titles_are_escaped():
    evil = '<script>alert("x")</script>'
    icicle = manual_figure(make_route(PARENTS, STATUS, titles={2: evil})).to_json()
    assert "<script>" not in icicle and "&lt;script&gt;" in icicle
