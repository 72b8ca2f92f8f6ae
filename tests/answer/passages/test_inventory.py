"""engine.answer.passages.inventory: a name question finds its entry through the whole manual's
entry inventory when the walk dropped its section (issue 66), on the real etoolbox manual."""
from __future__ import annotations

import re

import pytest

from engine.answer.passages import inventory, sentences
from engine.answer.passages import quote as quoting
from engine.answer.passages.passage_index import PassageIndex
from engine.answer.question import Question


@pytest.fixture(scope="module")
def etoolbox(shared_dir, real_tokenizer):
    from engine.document.build import build_tree

    tok = real_tokenizer
    return build_tree(shared_dir / "corpus" / "etoolbox-manual.pdf",
                      lambda t: tok.encode(t, add_special_tokens=False), tok.decode, 256)


def test_a_name_question_finds_its_entry_through_the_inventory(etoolbox):
    from bench.quote_time import stood_in_walk
    from engine.routing.dense import load_encoder

    tree = etoolbox
    inv = inventory.Inventory.build(PassageIndex.build(1, tree))
    names = {re.match(r"\\?\w+", e[2]).group(0) for e in inv.entries}
    assert {"\\newbool", "\\patchcmd", "\\newbool"} <= names and len(inv.entries) > 100
    q = Question.read("How do I define a new boolean flag?")
    assert inventory.asks_for_a_name(q.kind)
    found = inv.best(list(q.tokens))
    newbool = next(e[0] for e in inv.entries if e[2].startswith("\\newbool"))
    assert newbool in found
    # the walk without \newbool's section: the quote misses it; the inventory brings it back
    walk = [s for s in stood_in_walk(tree, 12)(q.text) if s.node_id != newbool]
    encoder = load_encoder("cpu")
    before = quoting.choose(sentences.score(encoder, q, sentences.candidates(walk)))
    extra = inventory.extra_sections(tree, inv, q, inventory.Kept(
        1, {s.node_id for s in walk}, lambda n: n))
    assert newbool in {s.node_id for s in extra}
    after = quoting.choose(sentences.score(encoder, q,
                                                   sentences.candidates(walk + extra)))
    assert before is None or not before.text.startswith("\\newbool")
    assert after is not None and after.text.startswith("\\newbool{⟨name⟩}"), after.text


def test_the_inventory_is_off_by_default_and_a_setting_turns_it_on():
    from engine.settings import Settings

    assert Settings().quote_inventory is False
    assert Settings.from_env({"H2MT_QUOTE_INVENTORY": "1"}).quote_inventory is True
