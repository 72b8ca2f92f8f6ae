"""engine.answer.passages.expansion: the back-of-book index's terms per page and the entry's
kind in words (issue 66, entry expansion)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.answer.passages import expansion
from engine.answer.passages.expansion import (entry_kinds, index_entries, kind_agreement,
                                              wanted_kinds)
from storage.tree import Node, Tree


def test_index_lines_of_real_manuals_give_their_terms_and_pages():
    # as the probe manuals' index nodes read (zsh, lilypond, beamer, pari)
    text = ("NO_HUP . . . . . . . . . . . . . . . . . . . . 111\n"
            "French clef. . . . . . . . . . . . . . . . . 17, 765\n"
            "handout class option, 201\n"
            "lexical scoping . . . . . . . . . . . . . . . 36\n"
            "\\hyperlink, 106\n"
            "sumalt . . . . . . 327–329\n")
    assert index_entries(text) == [("NO_HUP", [111]), ("French clef", [17, 765]),
                                   ("handout class option", [201]), ("lexical scoping", [36]),
                                   ("\\hyperlink", [106]), ("sumalt", [327, 328, 329])]


def test_a_head_term_is_read_with_the_entries_under_it_and_a_chapter_range_is_left_out():
    text = "history\nsharing, 45\nsaving, 46\nOverview, 3–40\n"
    assert index_entries(text) == [("history sharing", [45]), ("history saving", [46]),
                                   ("Overview", [])]


_TERM = st.from_regex(r"[A-Za-z\\][A-Za-z_ ]{0,30}[A-Za-z]", fullmatch=True).filter(
    lambda t: "  " not in t and len(t.split()) <= expansion.MAX_TERM_WORDS)
_PAGES = st.lists(st.integers(1, 1999), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(term=_TERM, pages=_PAGES, leader=st.booleans())
def test_any_index_line_gives_back_its_term_and_pages(term, pages, leader):
    line = f"{term} {'. ' * 5}{', '.join(map(str, pages))}" if leader else \
        f"{term}, {', '.join(map(str, pages))}"
    assert index_entries(line) == [(term, pages)]


def _tree_with_index(labels: tuple[str, ...]) -> Tree:
    import networkx as nx

    g = nx.DiGraph()
    nodes = [Node(0, None, 0, 0, "Manual", "", kind="root"),
             Node(1, 0, 0, 1, "Options", "SHARE_HISTORY shares the history between shells.",
                  page_start=3, page_end=3),
             Node(2, 0, 1, 1, "Index", "history, sharing . . . . . . . 1\nSHARE_HISTORY, 1\n"
                  "options, 1\n", page_start=4, page_end=4, kind="index")]
    for n in nodes:
        g.add_node(n.id, node=n)
        if n.parent is not None:
            g.add_edge(n.parent, n.id)
    return Tree(g, "outline", "Manual", 4, page_labels=labels)


def test_the_index_points_at_physical_pages_by_the_pdfs_labels_or_by_the_found_offset():
    labelled = expansion.BackIndex.build(_tree_with_index(("i", "ii", "1", "2")))
    assert labelled.terms_on(3) == "history, sharing; SHARE_HISTORY; options"
    assert labelled.terms_on(1) == "" and labelled.terms_on(None) == ""
    # no labels: printed page 1 is found on physical page 3 (the term is in its text)
    unlabelled = expansion.BackIndex.build(_tree_with_index(()))
    assert "SHARE_HISTORY" in unlabelled.terms_on(3)


def test_the_entrys_kind_is_read_from_its_signature_and_its_section():
    assert entry_kinds("-o file Specify output file name", "Gmsh > Command-line options") \
        == {"option"}
    assert entry_kinds("\\begin{frame}<overlay>", "Frames") == {"environment"}
    assert entry_kinds("\\patchcmd[<prefix>]{<command>}", "Patching") == {"command"}
    assert entry_kinds(".include filename", "Circuit description") == {"statement"}
    assert entry_kinds("HISTSIZE The maximum number of events", "Parameters") == {"key"}
    assert entry_kinds("General.OptionsFileName", "General options") == {"key", "option"}
    assert entry_kinds("It is a plain sentence.", "Introduction") == frozenset()


def test_the_kinds_a_question_names_and_their_agreement():
    assert wanted_kinds("Which command-line option sets the output file?") == {"option"}
    assert wanted_kinds("Which environment variable holds the history file?") == {"key"}
    assert wanted_kinds("What command saves the results?") == {"command"}
    assert wanted_kinds("How do I share history?") == frozenset()
    assert kind_agreement({"option"}, {"option", "key"}) == 1
    assert kind_agreement({"command"}, {"option"}) == -1
    assert kind_agreement(frozenset(), {"option"}) == 0
    assert kind_agreement({"option"}, frozenset()) == 0


def _unit(i: int, text: str, heading: str, entry: str = "", page: int = 1):
    from engine.answer.passages.sentences import Sentence

    return Sentence(rid=0, doc_id=1, node_id=i, heading=heading, index=0, text=text,
                    page_start=page, page_end=page, order=i, entry=entry)


def test_the_bonus_reads_the_index_terms_of_a_units_page_and_its_entrys_kind():
    from engine.answer.question import Question

    units = [_unit(0, "-n No execution: print what would happen.", "zmv > Options", page=3),
             _unit(1, "The history is kept in memory.", "History > Overview", page=5)]
    back = expansion.BackIndex({3: ["dry run"], 5: ["history, size"]})
    q = Question.read("Which option makes a dry run?")
    page = (lambda s: s.page_start)
    paged, W = expansion.PagedIndex(back, page), expansion.Weights
    assert expansion.bonus(q, units, "none", paged) == [0.0, 0.0]
    kind = expansion.bonus(q, units, "kind", paged, W(kind=0.1))
    assert kind == [0.1, 0.0]
    index = expansion.bonus(q, units, "index", paged, W(terms=0.2))
    assert index[0] == 0.2 and index[1] == 0.0  # the best match gets the whole weight
    both = expansion.bonus(q, units, "index+kind", paged, W(terms=0.2, kind=0.1))
    assert abs(both[0] - 0.3) < 1e-9 and both[1] == 0.0
    # a question naming no kind, and a manual without an index: nothing added
    plain = Question.read("How is the history kept?")
    empty = expansion.PagedIndex(expansion.BackIndex({}), page)
    assert expansion.bonus(plain, units, "index+kind", empty) == [0.0, 0.0]


def test_the_setting_is_checked_and_off_by_default():
    import pytest

    from engine.settings import Settings, SettingsError

    assert Settings().quote_expansion == "none"
    assert Settings.from_env({"H2MT_QUOTE_EXPANSION": "index+kind"}).quote_expansion \
        == "index+kind"
    with pytest.raises(SettingsError, match="H2MT_QUOTE_EXPANSION"):
        Settings(quote_expansion="bogus")


def test_an_ask_reads_the_expansion_when_the_setting_is_on(tiny_backbone, tmp_path):
    from engine.ask import AskOptions, ask
    from tests.support.runtime import widgets_runtime

    rt, doc = widgets_runtime(tiny_backbone, tmp_path)
    q = "Which setting file configures widgets?"
    off = ask(rt, doc, q, AskOptions(mode="quote"), log=False)
    for source in ("index", "kind", "index+kind"):
        rt.settings = rt.settings.with_(quote_expansion=source)
        on = ask(rt, doc, q, AskOptions(mode="quote"), log=False)
        assert on.quote is not None and off.quote is not None
        assert "widget.conf" in on.quote.text
    assert "back_index" in rt.cache  # built once for the document, kept for the next ask


def test_the_index_terms_put_the_entry_before_a_same_word_entry_on_a_big_manual(gmsh_tree):
    """Gmsh (390 pages, printed page numbers 10 behind the PDF's, no page labels): the linear
    score puts "-setstring name value" (it shares "name" and "option" with the question) before
    the option asked for; the manual's index points "Options, command-line" and "-o file" at
    the page of "-o file Specify output file name", and with the index terms' match added
    (``TERMS_WEIGHT``) that entry comes first."""
    import pymupdf

    from bench.probe_set import load_manuals, manual_pdf
    from bench.quote_time import stood_in_walk
    from engine.answer.passages import sentences
    from engine.answer.passages.pages import _norm, locate_page
    from engine.answer.question import Question
    from engine.routing.dense import load_encoder

    with pymupdf.open(manual_pdf(load_manuals()["gmsh"])) as pdf:
        pages = [_norm(p.get_text()) for p in pdf]

    def page_of(s):
        return locate_page(s.text, s.page_start, s.page_end, pages)

    back = expansion.BackIndex.build(gmsh_tree)
    assert len(back) > 500
    q = Question.read("Which command-line option sets the name of the output file?")
    encoder = load_encoder("cpu")
    walk = stood_in_walk(gmsh_tree, 50)(q.text)
    before = sentences.score(encoder, q, sentences.candidates(walk))
    assert not before[0].text.startswith("-o file")
    units = sentences.candidates(walk)
    bonus = expansion.bonus(q, units, "index", expansion.PagedIndex(back, page_of))
    after = sentences.score(encoder, q, units, expanded=sentences.Expanded(bonus=bonus))
    assert after[0].text.startswith("-o file"), after[0].text
    assert "Options, command-line" in back.terms_on(page_of(after[0]))
