"""engine.answer.passages.sections: which nodes may go into an answer's context (one rule for the text
mode's blocks, the ranked sentences and the evidence lines), and the packed blocks."""
from __future__ import annotations

from engine.answer.passages.sections import heading_path, pack_blocks, readable, routed_sections
from engine.document.tree import TreeAssembler
from engine.routing.router import RoutingTree


def _tree():
    t = TreeAssembler("markdown", "Manual")
    toc = t.add(0, title="Contents", text="1 Intro 1\n2 Use 2", kind="toc")
    intro = t.add(0, title="1 Intro", text="Widgets are small.", page_start=1, page_end=1)
    use = t.add(0, title="2 Use", text="")
    power = t.add(use, title="2.1 Power", text="Large widgets need 12 V.", page_start=3,
                  page_end=3)
    index = t.add(0, title="Index", text="widgets, 1", kind="index")
    return t.finish(), toc, intro, use, power, index


def test_contents_index_and_empty_nodes_are_not_readable():
    tree, toc, intro, use, power, index = _tree()
    assert [readable(tree.node(i)) for i in (toc, intro, use, power, index)] == [
        False, True, False, True, False]


def test_routed_sections_keep_the_order_and_skip_unreadable_and_unloaded_nodes():
    tree, toc, intro, use, power, index = _tree()
    routing = RoutingTree.from_tree(tree, None, doc_id=7)
    got = list(routed_sections(routing, {7: tree}, [power, toc, use, intro, index]))
    assert [(s.rid, s.doc_id, s.node_id) for s in got] == [(power, 7, power), (intro, 7, intro)]
    assert got[0].node.text == "Large widgets need 12 V."
    assert list(routed_sections(routing, {}, [power])) == []  # the document is not loaded


def test_blocks_are_numbered_under_heading_paths_and_pages():
    tree, toc, intro, use, power, index = _tree()
    assert heading_path(tree, power) == "2 Use > 2.1 Power"
    encode = str.split  # one token per word
    text, kept = pack_blocks(encode, 100, [(tree, toc), (tree, power), (tree, use), (tree, intro)])
    assert kept == [1, 3]
    assert text == ("[1] 2 Use > 2.1 Power (p. 3):\nLarge widgets need 12 V.\n\n"
                    "[2] 1 Intro (p. 1):\nWidgets are small.")


def test_block_bodies_are_the_blocks_less_their_headers():
    from engine.answer.passages.sections import block, block_bodies

    context = "\n\n".join([block(1, "Patching", 13, "\\patchcmd{<cmd>} patches it:\nsee below."),
                           block(2, "Lists > Loops", None, "[1] is no header here")])
    assert block_bodies(context).split("\n") == ["", "\\patchcmd{<cmd>} patches it:",
                                                 "see below.", "", "", "[1] is no header here"]
