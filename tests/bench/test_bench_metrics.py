"""Evaluation metrics: ROUGE-L, token F1, gold resolution, routing hit/coverage, BM25."""
from __future__ import annotations

import json

import pytest

from bench.baselines import BM25Index, bm25_tokens, context_text, node_corpus
from bench.metrics import (clean_reference, gold_regions, manual_gold, normalize_answer,
                           ordqa_gold, rouge_l, routing_hit, term_recall, token_f1)
from engine.document.tree import TreeAssembler

# -- answer quality ------------------------------------------------------------------------------


def test_rouge_l_known_pairs():
    assert rouge_l("the cat sat on the mat", "the cat sat on the mat") == pytest.approx(1.0)
    assert rouge_l("", "anything") == 0.0
    # LCS "the cat the mat" = 4 of 6 tokens each side -> P = R = F = 2/3
    assert rouge_l("the cat sat on the mat", "the cat lay by the mat") == pytest.approx(2 / 3)
    # stemming: "running"/"runs" both stem to "run"
    assert rouge_l("running fast", "runs fast") == pytest.approx(1.0)
    # order matters for the LCS: "a b c" vs "c b a" -> LCS 1 of 3
    assert rouge_l("alpha beta gamma", "gamma beta alpha") == pytest.approx(1 / 3)


def test_term_recall_of_a_quote_and_an_answer():
    ref = "Install it with `opam install why3`; then run why3 config --detect."
    # terms: opam, install, why3 (the code span), --detect (an option); "config" is prose
    quote = "It is as simple as\nopam install why3"
    assert term_recall(ref, quote) == pytest.approx(3 / 4)  # --detect missing
    assert term_recall(ref, None) == 0.0
    assert term_recall("Yes, it does.", "anything") is None  # no key term to recall


def test_token_f1_known_pairs():
    assert token_f1("The Cat sat.", "the cat sat") == 1.0  # case, punctuation, articles
    assert normalize_answer("An  apple, the PEAR!") == "apple pear"
    # prediction 4 tokens, reference 2 tokens, 2 shared -> P = 1/2, R = 1, F1 = 2/3
    assert token_f1("use patchcmd macro now", "patchcmd macro") == pytest.approx(2 / 3)
    assert token_f1("nothing shared", "other words") == 0.0
    assert token_f1("", "") == 1.0
    assert token_f1("", "something") == 0.0
    # repeated tokens count by multiplicity (Counter intersection)
    assert token_f1("x y y", "y y z") == pytest.approx(2 / 3)


def test_clean_reference_turns_literal_backslash_n_into_newlines():
    assert clean_reference("one\\ntwo") == "one\ntwo"


# -- hand-made trees -----------------------------------------------------------------------------


def _manual_tree():
    """root
         1 Intro (p1)
           2 Definitions (p2)
           3 Patching (p2)
             4 \\patchcmd (p3)
         5 Author (p5)
           6 Definitions (p6)      <- same title as 2, another page
           7 Patching (p13)
    """
    asm = TreeAssembler("outline", "Manual", pages=20)
    intro = asm.add(0, title="1 Intro", text="intro text", page_start=1, page_end=1)
    asm.add(intro, title="Definitions", text="define macros with def", page_start=2, page_end=2)
    p = asm.add(intro, title="Patching", text="patching commands", page_start=2, page_end=3)
    asm.add(p, title="\\patchcmd", text="patchcmd replaces search with replace", page_start=3, page_end=3)
    author = asm.add(0, title="Author", text="author commands", page_start=5, page_end=5)
    asm.add(author, title="Definitions", text="robust definitions for authors", page_start=6, page_end=12)
    asm.add(author, title="Patching", text="hooks and patching of commands", page_start=13, page_end=20)
    return asm.finish()


def _ordqa_tree():
    asm = TreeAssembler("json", "openroad_documentation")
    gr = asm.add(0, title="global_routing", kind="section")
    c0 = asm.add(gr, title="Global Routing", text="intro", ref="global_routing_0", kind="chunk")
    c6 = asm.add(gr, title="Set Routing Alpha", ref="global_routing_6", kind="chunk")
    asm.add(c6, text="first paragraph of alpha", kind="paragraph")
    asm.add(c6, text="second paragraph of alpha", kind="paragraph")
    pp = asm.add(0, title="pin_placement", kind="section")
    asm.add(pp, title="Place Pins", text="place_pins command", ref="pin_placement_1", kind="chunk")
    return asm.finish(), (gr, c0, c6, pp)


def test_manual_gold_matches_title_and_page_with_repeated_titles():
    t = _manual_tree()
    gold = manual_gold(t, [{"title": "Definitions", "page": 6}, {"title": "Patching", "page": 2},
                           {"title": "  Patching ", "page": 13}, {"title": "Definitions", "page": 9}])
    assert gold == [{6}, {3}, {7}, set()]  # whitespace-normalised; a wrong page matches nothing


def test_ordqa_gold_by_reference_id():
    t, (gr, c0, c6, pp) = _ordqa_tree()
    gold = ordqa_gold(t, ["global_routing_6", "pin_placement_1", "no_such_chunk_3"])
    assert gold[0] == {c6}
    assert len(gold[1]) == 1 and t.node(next(iter(gold[1]))).ref == "pin_placement_1"
    assert gold[2] == set()


def test_routing_hit_and_coverage_on_hand_made_tree():
    t = _manual_tree()
    regions = gold_regions(t, manual_gold(t, [{"title": "Patching", "page": 2},
                                              {"title": "Definitions", "page": 6}]))
    assert regions[0] == {3, 4}
    # a descendant of the gold node is a hit; an ancestor (1) is not
    h = routing_hit([1, 4], regions)
    assert h.hit and not h.full and h.coverage == 0.5 and h.reached == [True, False]
    h = routing_hit([1, 5], regions)
    assert not h.hit and h.coverage == 0.0
    h = routing_hit([3, 6], regions)
    assert h.hit and h.full and h.coverage == 1.0
    # the same-titled node on another page does not count
    assert not routing_hit([2], regions).hit
    assert routing_hit([], []).hit is False


def test_ordqa_hit_inside_chunk_subtree():
    t, (gr, c0, c6, pp) = _ordqa_tree()
    regions = gold_regions(t, ordqa_gold(t, ["global_routing_6"]))
    paragraph = t.children(c6)[1].id
    assert routing_hit([paragraph], regions).hit
    assert not routing_hit([gr, c0], regions).hit  # the parent source page is not the chunk


# -- retrieval baselines -------------------------------------------------------------------------


def test_bm25_tokens():
    assert bm25_tokens("Use \\patchcmd{x}, global_routing_6!") == ["use", "patchcmd", "x", "global_routing_6"]


def test_bm25_retrieval_on_toy_corpus():
    texts = ["how to install the package with pip", "patchcmd replaces search text in a macro",
             "routing alpha sets the global routing cost", "pin placement places pins on the die edge",
             "another note about pip and install"]
    index = BM25Index.build([10, 11, 12, 13, 14], texts)
    assert index.search("which command patches a macro: patchcmd?", 1) == [11]
    assert index.search("set global routing alpha", 2)[0] == 12
    assert set(index.search("pip install", 2)) == {10, 14}
    assert len(index.search("pins", 10)) == 5  # n larger than the corpus: everything, ranked


def test_bm25_on_tree_nodes_and_context_budget():
    t = _manual_tree()
    ids, texts = node_corpus(t)
    assert ids[0] == 0 and len(ids) == len(t)  # every node here has text (the root has a title)
    index = BM25Index.build(ids, texts)
    got = index.search("patchcmd replace search", 2)
    assert got[0] == 4
    encode = lambda s: s.split()  # a stand-in tokenizer: one token per word
    # node 4 has 6 words, node 3 ("Patching\npatching commands") 3 and the root 1: with 8
    # tokens of room, 3 no longer fits after 4 but the root still does (skip, not stop)
    ctx, used = context_text(t, [4, 3, 0], encode, budget=8)
    assert used == [4, 0] and ctx.startswith("[1] \\patchcmd (p. 3):")
    assert "[2] Manual" in ctx
    # text mode's cap on sections: the first fitting blocks only, however much room is left
    from engine.answer.passages.sections import pack_blocks

    ctx, used = pack_blocks(encode, 100, [(t, 4), (t, 3), (t, 0)], max_blocks=2)
    assert used == [0, 1] and "[2] " in ctx and "[3] " not in ctx


def test_real_manual_gold_resolves(shared_dir, corpus_tree):
    """Every etoolbox gold item of the dev set names exactly one node of the raw outline tree."""
    tree = corpus_tree("etoolbox-manual.pdf")
    rows = [json.loads(x) for x in (shared_dir / "bench" / "manuals" / "dev_qa.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["doc"] == "etoolbox-manual.pdf"]
    assert rows
    for r in rows:
        for g in manual_gold(tree, r["gold"]):
            assert len(g) == 1, r["id"]


def test_term_recall_is_the_recall_of_the_references_key_terms():
    from bench.metrics import term_recall

    ref = "Use \\patchcmd with --prefix; it returns 1."
    assert term_recall(ref, "Call \\patchcmd, then --prefix and 1.") == 1.0
    assert term_recall(ref, "Use \\pretocmd and --prefix.") == 1 / 3
    assert term_recall("Just patch it.", "anything") is None


def test_check_rates_split_held_answers_by_the_flag():
    from bench.metrics import check_rates

    rows = [{"flagged": True, "answer_terms": 0.0}, {"flagged": True, "answer_terms": 1.0},
            {"flagged": False, "answer_terms": 1.0}, {"flagged": False, "answer_terms": 0.5},
            {"flagged": False, "answer_terms": 0.25}, {"flagged": True, "answer_terms": None},
            {"flagged": None, "answer_terms": 1.0}]
    got = check_rates(rows)
    assert got["n"] == 6 and got["n_flagged"] == 3 and got["flagged"] == 0.5
    assert got["n_judged"] == 5 and got["n_held"] == 3
    assert got["held_flagged"] == 0.5 and got["held_unflagged"] == 2 / 3
    assert got["flagged_of_held"] == 1 / 3
    assert got["recall_flagged"] == 0.5 and got["recall_unflagged"] == 1.75 / 3
    some = check_rates(rows, held_at=1e-9)  # at least one key term
    assert some["n_held"] == 4 and some["held_unflagged"] == 1.0 and some["flagged_of_held"] == 0.25
    assert check_rates([])["flagged"] is None


def test_the_check_table_has_one_row_per_checked_mode():
    from bench.qa import check_table

    rows = [{"set": "s", "mode": "text", "flagged": True, "answer_terms": 0.0},
            {"set": "s", "mode": "text", "flagged": False, "answer_terms": 1.0},
            {"set": "s", "mode": "memory", "flagged": False, "answer_terms": 0.25},
            {"set": "s", "mode": "route", "flagged": None, "answer_terms": None}]
    table = check_table(rows, "s").splitlines()
    assert len(table) == 4 and table[2].startswith("| memory | 1 | 0 (0.0%)")
    assert table[3] == ("| text | 2 | 1 (50.0%) | 0.0 / 100.0 | 0.0 / 100.0 | 0.0 (1) "
                        "| 0.0 / 100.0 | 0.0 (1) |")
    assert check_table(rows, "other") == ""
