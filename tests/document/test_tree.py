"""Token-limit splitting (H2MT 3.1) and the Tree type, on real corpus files and small trees."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from engine.document.tree import ROOT, TreeAssembler
from engine.document.build import build_tree
from engine.document.split import split_long_nodes


@pytest.fixture(scope="module")
def codec(real_tokenizer):
    enc = lambda t: real_tokenizer.encode(t, add_special_tokens=False)  # noqa: E731
    dec = lambda ids: real_tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    return enc, dec


@pytest.mark.parametrize("name", ["etoolbox-manual.pdf", "pseudo-manual_no-outline.pdf",
                                  "reportlab-userguide.pdf"])
def test_no_node_exceeds_the_limit_on_real_manuals(shared_dir, codec, name):
    enc, dec = codec
    tree = build_tree(shared_dir / "corpus" / name, enc, dec, 256)
    tree.validate()
    for n in tree.preorder():
        assert n.tokens == len(enc(n.local_text))
        assert n.tokens <= 256, (n.title, n.tokens)
    # The long section 4.2 of pseudo (pages 20-45) must have been split into children.
    if name.startswith("pseudo"):
        long = [n for n in tree.preorder() if n.title.startswith("4.2 ")]
        assert long and len(tree.children(long[0].id)) > 10


def test_labels_of_split_pieces_name_their_section_not_a_body_fragment(shared_dir, codec):
    """A piece of a split section is "<section title> › part i of n", never the first words of
    its own body (cited titles used to read as sentence fragments); the routing tree, the
    citations and the outline use these labels."""
    from engine.routing.router import RoutingTree

    enc, dec = codec
    tree = build_tree(shared_dir / "corpus" / "camlidl-manual_no-outline.pdf", enc, dec, 256)
    labels = tree.labels()
    assert set(labels) == set(tree.graph.nodes)
    untitled = [n for n in tree.preorder() if not n.title.strip() and n.parent is not None]
    assert len(untitled) >= 10
    for n in untitled:
        head = next(p.title for p in reversed(tree.path(n.parent)) if p.title.strip())
        siblings = [c.id for c in tree.children(n.parent) if not c.title.strip()]
        part = (f"part {siblings.index(n.id) + 1} of {len(siblings)}" if len(siblings) > 1
                else "text")
        assert labels[n.id] == f"{head} › {part}"
        assert tree.label(n.id) == labels[n.id]
    titled = [n for n in tree.preorder() if n.title.strip() and n.parent is not None]
    assert all(labels[n.id] == n.title for n in titled)
    routing = RoutingTree.from_tree(tree, None)
    assert routing.title == [labels[i] for i in sorted(tree.graph.nodes)]
    assert all(labels[n.id] in tree.outline() for n in untitled)


def test_ordqa_keeps_290_chunk_ids_after_splitting(shared_dir, codec):
    enc, dec = codec
    tree = build_tree(shared_dir / "bench" / "ordqa" / "openroad_documentation.json", enc, dec, 256)
    refs = [n.ref for n in tree.preorder() if n.ref]
    assert len(refs) == 290 == len(set(refs))
    assert tree.source == "json"
    assert max(n.tokens for n in tree.preorder()) <= 256


def test_outline_depth_kept_after_splitting(shared_dir, codec, corpus_tree):
    enc, dec = codec
    raw = corpus_tree("etoolbox-manual.pdf")
    tree = build_tree(shared_dir / "corpus" / "etoolbox-manual.pdf", enc, dec, 256)
    assert tree.depth >= raw.depth
    raw_titles = [n.title for n in raw.preorder() if n.title]
    titles = [n.title for n in tree.preorder() if n.title]
    assert raw_titles == titles  # splitting adds untitled children only


paragraph = st.text(alphabet=st.characters(codec="ascii", categories=["L", "N", "P", "Zs"]),
                    min_size=0, max_size=400)


@settings(max_examples=25, deadline=None)
@given(bodies=st.lists(st.lists(paragraph, max_size=6), min_size=1, max_size=5),
       limit=st.integers(min_value=8, max_value=64))
def test_split_respects_any_limit_and_keeps_text(codec, bodies, limit):
    enc, dec = codec
    asm = TreeAssembler("text", "Doc")
    for i, paras in enumerate(bodies):
        asm.add(ROOT, title=f"Part {i}", text="\n\n".join(paras))
    tree = split_long_nodes(asm.finish(), enc, dec, limit)
    tree.validate()
    for n in tree.preorder():
        assert len(enc(n.local_text)) <= limit
    # No text lost or reordered: each part's body survives, up to whitespace, in its own text
    # followed by its new children's texts.
    squash = lambda t: "".join(t.split())  # noqa: E731
    for i, part in enumerate(tree.children(ROOT)):
        assert part.title == f"Part {i}"
        pieces = [part.text] + [c.text for c in tree.children(part.id)]
        assert squash("".join(pieces)) == squash("".join(bodies[i]))


def test_heights_give_a_post_order_schedule():
    asm = TreeAssembler("markdown", "T")
    a = asm.add(ROOT, title="a")
    b = asm.add(a, title="b")
    asm.add(b, title="c")
    asm.add(ROOT, title="d")
    tree = asm.finish()
    levels = tree.levels_bottom_up()
    seen: set[int] = set()
    for level in levels:
        for n in level:
            assert all(c.id in seen for c in tree.children(n.id))
        seen |= {n.id for n in level}
    assert [len(lv) for lv in levels] == [2, 1, 1, 1]


def test_an_over_long_paragraph_is_cut_between_its_sentences():
    """A paragraph over the node budget is cut at sentence ends (whole sentences a chunk, line
    breaks kept); the chunks after the first go on from it (kind "chunk")."""
    from engine.document.tree import TreeAssembler

    para = "\n".join(f"Sentence number {i} says a few words about it." for i in range(40))
    asm = TreeAssembler("text", "Doc")
    asm.add(0, title="Long", text=para)
    enc = lambda s: s.split()  # noqa: E731 - a word a token
    tree = split_long_nodes(asm.finish(), enc, lambda ids: " ".join(ids), 64)
    long = next(n for n in tree.preorder() if n.title == "Long")
    kids = tree.children(long.id)
    assert len(kids) > 1 and [k.kind for k in kids] == ["paragraph"] + ["chunk"] * (len(kids) - 1)
    assert all(k.text.startswith("Sentence number") and k.text.endswith("about it.") for k in kids)
    assert "\n".join(k.text for k in kids) == para
