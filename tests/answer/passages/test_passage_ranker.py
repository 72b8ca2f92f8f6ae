"""The passage ranker (engine.answer.passages.ranking), its flat passage index (engine.answer.passages.passage_index),
front and back matter by shape (engine.document.matter) and the no-fragment rule of the quote,
on corpus manuals with the real sentence encoder and the shipped ranker file."""
from __future__ import annotations

import pytest

from engine.answer.passages import quote as quoting
from engine.answer.passages import ranking
from engine.answer.passages import sentences as S
from engine.answer.passages.sections import heading_path
from engine.answer.passages.passage_index import PassageIndex
from engine.document.hygiene import mark_evidence_hygiene
from engine.document.matter import LISTING, TITLE_PAGE, asks_for_matter, matter_kind
from engine.settings import SHIPPED_PASSAGE_RANKER
from engine.answer.question import Question


@pytest.fixture(scope="module")
def encoder():
    from engine.routing.dense import load_encoder

    return load_encoder("cpu")


@pytest.fixture(scope="module")
def ranker():
    assert SHIPPED_PASSAGE_RANKER.is_file(), "assets/passage_ranker.json must ship"
    return ranking.PassageRanker.load(SHIPPED_PASSAGE_RANKER)


def _tree(corpus_tree, name):
    return mark_evidence_hygiene(corpus_tree(name))


def test_title_pages_are_recognised_by_shape_on_corpus_pdfs(corpus_tree):
    """reportlab's and camlidl's title pages are marked by their shape (the builder calls them
    "Front matter"; the rule reads no title); no ordinary section of beamer is marked."""
    for name in ("reportlab-userguide.pdf", "camlidl-manual_no-outline.pdf"):
        tree = _tree(corpus_tree, name)
        first = next(n for n in tree.preorder() if n.parent is not None and n.text.strip())
        assert first.kind == TITLE_PAGE, (name, first.title, first.text[:80])
    beamer = _tree(corpus_tree, "beamer-userguide.pdf")
    assert not [n.title for n in beamer.preorder() if n.kind in (TITLE_PAGE, LISTING)]


def test_listings_by_shape():
    words = "\n".join(f"\\cmd{c}{i}" for c in "abcdefgh" for i in range(5))  # 40 single words
    assert matter_kind(words, 300, 400) == LISTING
    prose = "\n".join(f"This sentence number {i} explains how a command works in detail."
                      for i in range(40))
    assert matter_kind(prose, 300, 400) is None
    assert asks_for_matter("What does the glossary say about frames?")
    assert not asks_for_matter("How do I make a frame?")


def test_no_quote_is_a_fragment():
    def unit(i, text, score, kind="sentence"):
        return S.Sentence(rid=1, doc_id=1, node_id=i, heading="H", index=0, text=text,
                          page_start=1, page_end=1, order=i, score=score, kind=kind)
    ranked = [unit(1, "The", 0.99, "line"), unit(2, "Frames are made with the frame environment.",
                                                 0.9)]
    q = quoting.choose(ranked, threshold=0.5)
    assert q is not None and q.text.startswith("Frames are made")
    assert quoting.is_fragment("The") and not quoting.is_fragment("$ make install")
    assert quoting.choose([unit(1, "The", 0.99, "line")], threshold=0.5) is None


def _ask(ranker, encoder, tree, question, routed_ids):
    index = PassageIndex.build(1, tree)
    sections = [S.SectionText(rid=n, doc_id=1, node_id=n, heading=heading_path(tree, n),
                              body=tree.node(n).text, page_start=tree.node(n).page_start,
                              page_end=tree.node(n).page_end) for n in routed_ids]
    ranked, cands = ranking.rank(ranker, encoder, Question.read(question),
                                 S.candidates(sections),
                                 ranking.Manuals({1: index}, lambda d, n: n, {1: tree.pages}))
    return ranked, quoting.choose(ranked, ranker.threshold)


def _node(tree, title):
    return next(n.id for n in tree.preorder() if n.title.endswith(title))


def test_the_shipped_ranker_ranks_a_known_passage_first(ranker, encoder, corpus_tree):
    """etoolbox (a dev manual), the walk routed "Author Commands > Patching": inserting code at
    the start of a command by a patch is \\pretocmd's passage, found by both channels."""
    tree = _tree(corpus_tree, "etoolbox-manual.pdf")
    patching = next(n.id for n in tree.preorder()
                    if heading_path(tree, n.id).endswith("Author Commands > Patching"))
    question = "How do I insert code at the beginning of a command with a patch?"
    ranked, q = _ask(ranker, encoder, tree, question, sorted(tree.subtree_ids(patching)))
    assert q is not None and "\\pretocmd" in q.text and q.channel == "both", q


def test_a_flat_bm25_candidate_reaches_the_quote(ranker, encoder, corpus_tree):
    """The walk routed only an unrelated section; the flat passage BM25 over the whole manual
    still brings \\ifdefempty's passage, and the quote comes from it."""
    tree = _tree(corpus_tree, "etoolbox-manual.pdf")
    unrelated = _node(tree, "License")
    ranked, q = _ask(ranker, encoder, tree, "How do I test whether a macro is defined but empty?",
                     [unrelated])
    assert q is not None and q.channel == "flat BM25" and q.node_id != unrelated
    assert "empty" in q.text.lower()
