"""The memory writer (H2MT 3.2) on a tiny random Llama with the real SmolLM2 tokenizer."""
from __future__ import annotations

import pytest
import torch

from engine.memory.aggregate import POLICIES
from engine.memory.parts import H2MTParts
from engine.document.tree import TreeAssembler
from engine.document.split import split_long_nodes
from engine.memory.writer import WriteStats, _Item, batches_by_length, read_out, write_memories


def small_tree(tiny_backbone, texts_per_section=3):
    asm = TreeAssembler("markdown", "Manual", root_text="A manual about widgets.")
    for s in range(3):
        sec = asm.add(0, title=f"Section {s}", text="" if s == 1 else f"Intro of section {s}.")
        for p in range(texts_per_section + s):
            asm.add(sec, text=f"Paragraph {p} of section {s}: " + "widget " * (3 + 4 * p), kind="paragraph")
    empty = asm.add(0, title="", text="")  # an internal node with no text at all
    asm.add(empty, text="the only child of an empty node", kind="paragraph")
    tree = asm.finish()
    return split_long_nodes(tree, tiny_backbone.encode, tiny_backbone.decode, 64)


def test_leaf_memory_is_hidden_state_at_e_read(tiny_backbone, tiny_parts):
    """3.2.1: m_v = final hidden state at e_read of [e_write; E_v; e_read]."""
    bb = tiny_backbone
    ids = bb.encode("Set the widget size with the size option.")
    got = read_out(bb, tiny_parts, [_Item(0, ids, None)])[0]
    emb = torch.cat([tiny_parts.e_write[None], bb.embed(torch.tensor(ids)), tiny_parts.e_read[None]])
    want = bb.model.model(inputs_embeds=emb[None]).last_hidden_state[0, -1]
    torch.testing.assert_close(got, want)


def test_internal_memory_uses_aggregated_children_and_text(tiny_backbone, tiny_parts):
    """3.2.2: m_v = h([e_write; m~_v; E_v; e_read])[last] with m~_v = Agg(children)."""
    bb = tiny_backbone
    tree = small_tree(bb)
    mem = write_memories(tree, bb, tiny_parts)
    sec0 = tree.children(0)[0]
    kids = torch.stack([mem[c.id] for c in tree.children(sec0.id)])
    m_tilde = kids.mean(0)  # mean policy
    prefix = tiny_parts.memory_as_input(m_tilde)
    ids = torch.tensor(bb.encode(sec0.local_text))
    emb = torch.cat([tiny_parts.e_write[None], prefix[None], bb.embed(ids), tiny_parts.e_read[None]])
    want = bb.model.model(inputs_embeds=emb[None]).last_hidden_state[0, -1]
    torch.testing.assert_close(mem[sec0.id], want, rtol=1e-4, atol=1e-4)


def test_empty_text_bypasses_backbone(tiny_backbone, tiny_parts):
    """3.2.2: if x_v is empty, m_v = m~_v."""
    tree = small_tree(tiny_backbone)
    mem = write_memories(tree, tiny_backbone, tiny_parts)
    empty = [n for n in tree.preorder() if not n.local_text and not tree.is_leaf(n.id)]
    assert empty, "the test tree must have an internal node without text"
    for n in empty:
        kids = torch.stack([mem[c.id] for c in tree.children(n.id)])
        assert torch.equal(mem[n.id], kids.mean(0))


def test_every_node_gets_a_memory_and_batching_matches_one_by_one(tiny_backbone, tiny_parts):
    tree = small_tree(tiny_backbone)
    stats = WriteStats()
    batched = write_memories(tree, tiny_backbone, tiny_parts, max_batch_nodes=32, stats=stats)
    single = write_memories(tree, tiny_backbone, tiny_parts, max_batch_nodes=1)
    assert set(batched) == set(tree.graph.nodes)
    assert stats.forwards < stats.backbone_nodes  # really batched
    for nid in batched:
        assert batched[nid].shape == (tiny_backbone.hidden_size,)
        torch.testing.assert_close(batched[nid], single[nid], rtol=1e-4, atol=1e-4)


def test_batches_are_length_sorted_and_bounded():
    items = [_Item(i, list(range(n)), None) for i, n in enumerate([5, 50, 7, 30, 30, 1, 90])]
    batches = batches_by_length(items, max_nodes=3, max_tokens=120)
    lengths = [it.length for b in batches for it in b]
    assert lengths == sorted(lengths, reverse=True)
    assert sorted(it.key for b in batches for it in b) == list(range(7))
    for b in batches:
        assert len(b) <= 3
        assert len(b) == 1 or len(b) * b[0].length <= 120


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_writes_memories(tiny_backbone, policy):
    parts = H2MTParts(tiny_backbone.hidden_size, policy).init_from_backbone(tiny_backbone)
    tree = small_tree(tiny_backbone)
    mem = write_memories(tree, tiny_backbone, parts)
    assert all(torch.isfinite(v).all() for v in mem.values())


def test_parts_save_load_and_fingerprint(tiny_backbone, tiny_parts, tmp_path):
    path = tmp_path / "parts.safetensors"
    tiny_parts.save(path)
    again = H2MTParts.load(path)
    for k, v in tiny_parts.state_dict().items():
        assert torch.equal(v, again.state_dict()[k])
    assert again.fingerprint("tiny") == tiny_parts.fingerprint("tiny")
    assert again.fingerprint("other-backbone") != tiny_parts.fingerprint("tiny")
    with torch.no_grad():
        again.e_read.add_(1e-3)
    assert again.fingerprint("tiny") != tiny_parts.fingerprint("tiny")
    other_policy = H2MTParts(tiny_backbone.hidden_size, "gat").init_from_backbone(tiny_backbone)
    assert other_policy.fingerprint("tiny") != tiny_parts.fingerprint("tiny")
