"""Sentence-level evidence and the quote (engine.answer.passages.sentences, engine.answer.passages.quote), with the
real sentence encoder."""
from __future__ import annotations

import pytest

from engine.answer.passages import quote as quoting
from engine.answer.passages import sentences as S
from engine.answer.question import Question

SECTIONS = [
    S.SectionText(rid=1, doc_id=1, node_id=10, heading="Installing", page_start=3, page_end=3,
                  body="Run the installer and answer its questions. The installer writes "
                       "widget.conf for you. Afterwards restart the widget service once."),
    S.SectionText(rid=2, doc_id=1, node_id=20, heading="Sizes > Large widgets", page_start=5,
                  page_end=5,
                  body="Large widgets are the heavy models of the range. Large widgets need a "
                       "12 V supply. Never connect them to 230 V. Their casing is made of steel."),
    S.SectionText(rid=3, doc_id=1, node_id=30, heading="Colours", page_start=7, page_end=7,
                  body="Widgets come in red, green and blue paint. Custom colours cost extra "
                       "and take six weeks to deliver."),
]


@pytest.fixture(scope="module")
def encoder():
    from engine.routing.dense import load_encoder

    return load_encoder("cpu")


def ranked(encoder, question):
    return S.score(encoder, Question.read(question), S.candidates(SECTIONS))


def test_the_quote_is_the_best_sentence_and_its_sequel_verbatim(encoder):
    question = "Which power supply voltage does a large widget need?"
    alone = S.score(encoder, Question.read(question), S.candidates(SECTIONS),
                    S.ScoreRule(window_words=0))
    assert alone[0].text == "Large widgets need a 12 V supply."  # each unit read alone
    r = ranked(encoder, question)  # each unit read with its window (the quote from it)
    assert r[0].node_id == 20 and r[0].score >= r[-1].score
    q = quoting.choose(r)
    assert q is not None and (q.node_id, q.page, q.heading) == (20, 5, "Sizes > Large widgets")
    # forward from the best unit, contiguous, holding the fact and what follows it
    assert "Large widgets need a 12 V supply. Never connect them to 230 V." in q.text
    assert q.text in " ".join(SECTIONS[1].body.split())
    assert q.as_json()["page"] == 5 and q.as_json()["doc"] == 1


def test_a_how_to_question_quotes_its_best_sentence_forward(encoder):
    """No special case for how-to questions (measured: a section's opening scored lower than its
    best sentence on both dev sets): the quote starts at the best sentence."""
    question = "How do I get widget.conf written?"
    r = ranked(encoder, question)
    q = quoting.choose(r)
    assert q is not None and q.node_id == 10
    assert q.text.startswith("The installer writes widget.conf for you.")  # not the opening
    assert q.text in " ".join(SECTIONS[0].body.split())


def test_only_the_best_sentences_by_words_are_encoded(encoder):
    """``encoded`` caps the encoder's work; the others stay ranked, with cosine 0."""
    question = "Which power supply voltage does a large widget need?"
    few = S.score(encoder, Question.read(question), S.candidates(SECTIONS), S.ScoreRule(encoded=2))
    assert sum(1 for s in few if s.cosine != 0.0) == 2 and len(few) == len(S.candidates(SECTIONS))
    assert few[0].node_id == 20 and few[0].cosine != 0.0
    # nothing matched by words: every sentence is encoded
    none = S.score(encoder, Question.read("Zzyzx qwvb?"), S.candidates(SECTIONS),
                   S.ScoreRule(encoded=2))
    assert sum(1 for s in none if s.cosine != 0.0) == len(none)


def test_an_unrelated_question_gets_no_quote_and_no_context(encoder):
    question = "Who won the football world cup in 1954?"
    r = ranked(encoder, question)
    assert quoting.choose(r) is None
    assert S.select(r, lambda t: len(t.split())) == []


def test_selection_keeps_the_budget_and_document_order(encoder):
    r = ranked(encoder, "What voltage do large widgets need, and what colours exist?")
    kept = S.select(r, lambda t: len(t.split()), budget=30, threshold=0.0)
    assert kept and sum(len(s.text.split()) + 4 for s in kept) <= 30
    assert [s.order for s in kept] == sorted(s.order for s in kept)
    text = S.context_text(kept)
    assert "(p. " in text and text.startswith("[1] ")
    for s in kept:
        assert s.text in text


def _real_section(tree, title, rid=1):
    n = next(x for x in tree.preorder() if x.title == title)
    return S.SectionText(rid=rid, doc_id=1, node_id=n.id, heading=title, body=n.text,
                         page_start=n.page_start, page_end=n.page_end)


def test_how_to_quote_holds_the_command_and_the_sentence_it_leans_on(encoder, corpus_tree):
    """Why3's install section: "It is as simple as" introduces `opam install why3` on a line of
    its own (3 words), and "It" leans on the sentence naming Opam: the quote has all three."""
    tree = corpus_tree("why3-manual.pdf")
    secs = [_real_section(tree, "Installation via Opam", 1),
            _real_section(tree, "Installation via Docker", 2),
            _real_section(tree, "Installation from Source Distribution", 3)]
    question = "How do I install Why3 with opam?"
    q = quoting.choose(S.score(encoder, Question.read(question), S.candidates(secs)))
    assert q is not None and q.heading == "Installation via Opam"
    assert q.text.startswith("The simplest way to install Why3 is via Opam")
    assert "It is as simple as\nopam install why3" in q.text


def test_r_help_quote_holds_the_command(encoder, corpus_tree):
    tree = corpus_tree("r-intro.pdf")
    secs = [_real_section(tree, "Getting help with functions and features")]
    question = "How do I get help about a function such as solve?"
    q = quoting.choose(S.score(encoder, Question.read(question), S.candidates(secs)))
    assert q is not None and "> help(solve)" in q.text.split("\n")


def test_the_reader_gets_the_same_passage_with_its_lines(encoder, corpus_tree):
    """Text mode's selection: the introduced command keeps its line, and the unit it leans on
    comes along, in document order under the heading."""
    tree = corpus_tree("why3-manual.pdf")
    secs = [_real_section(tree, "Installation via Opam", 1)]
    question = "How do I install Why3 with opam?"
    ranked = S.score(encoder, Question.read(question), S.candidates(secs))
    assert ranked[0].text == "It is as simple as\nopam install why3" and ranked[0].kind == "intro"
    kept = S.select(ranked, lambda t: len(t.split()), budget=40)
    assert [s.text.split("\n")[0][:24] for s in kept[:2]] == [
        "The simplest way to inst", "It is as simple as"]
    ctx = S.context_text(kept)
    assert "package manager. It is as simple as\nopam install why3" in ctx


def test_a_units_window_is_what_a_quote_from_it_shows():
    """``windows``: the unit and the next ones of its section, contiguous, within the caps; a
    signature line is read with its description, never with another section's units."""
    sents = S.candidates([
        S.SectionText(rid=1, doc_id=1, node_id=10, heading="Hooks > \\newtoggle", page_start=16,
                      page_end=16, body="\\newtoggle{<name>}\nDefines a new flag. The initial "
                      "state of newly defined flags is false. It may be set later."),
        S.SectionText(rid=2, doc_id=1, node_id=20, heading="Hooks > \\settoggle", page_start=16,
                      page_end=16, body="Sets the flag to true or false as given."),
    ])
    w = S.windows(sents, words=48, units=3)
    assert sents[0].kind == "entry"  # the signature with its description's first sentence
    assert w[0] == ("\\newtoggle{<name>}\nDefines a new flag.\nThe initial state of newly "
                    "defined flags is false.\nIt may be set later.")  # three units at most
    assert w[1] == "The initial state of newly defined flags is false.\nIt may be set later."
    assert w[3] == "Sets the flag to true or false as given."  # its section's last: alone
    assert S.windows(sents, words=12, units=3)[0] == "\\newtoggle{<name>}\nDefines a new flag."
    assert S.windows(sents, words=0) == [s.text for s in sents]


def test_a_text_two_sections_share_is_each_ones_and_read_once():
    """Two reference entries with one description: each section keeps its units (its quote reads
    on through them, etoolbox's \\newtoggle quoted its signature line alone before), and the
    reader's context holds the text once."""
    body = ("{sig}\nDefines a new boolean flag called <name>. If the flag has already been "
            "defined, this command issues an error. The initial state of newly defined flags "
            "is false. This command is robust.")
    sections = [S.SectionText(rid=i, doc_id=1, node_id=10 * i, heading=f"Flags > {sig}",
                              page_start=15 + i, page_end=15 + i, body=body.format(sig=sig + "{<name>}"))
                for i, sig in enumerate(["\\newbool", "\\newtoggle"], 1)]
    cands = S.candidates(sections)
    assert [c.node_id for c in cands].count(20) == [c.node_id for c in cands].count(10) == 4
    question = "What is the initial state of a flag created with \\newtoggle?"
    ranked = S.score(None, Question.read(question), cands)  # words alone: the heading names \newtoggle
    q = quoting.choose(ranked, threshold=0.0)
    assert q.node_id == 20 and "initial state of newly defined flags is false" in q.text
    kept = S.select(ranked, lambda t: len(t.split()), budget=10_000, threshold=0.0)
    assert len(kept) == len({k.text for k in kept}) == 5  # two entries' openings, three shared


def test_the_reader_sees_an_entry_s_name_before_its_later_sentence():
    """A description sentence kept without its entry's opening ("This command ...") comes to the
    reader under the entry's signature line, once per entry; a unit that opens with the
    signature is not named twice."""
    sec = S.SectionText(rid=1, doc_id=1, node_id=10, heading="Patching", page_start=13,
                        page_end=13, body="\\patchcmd{<command>}{<search>}{<replace>}\n"
                        "Extracts the replacement text of a command. It replaces search with "
                        "replace. The assignment is local. This command is robust.")
    cands = S.candidates([sec])
    assert cands[0].kind == "entry" and all(c.entry.startswith("\\patchcmd") for c in cands)
    later = [c for c in cands if c.text in ("The assignment is local.", "This command is robust.")]
    text = S.context_text(later)
    assert text.splitlines()[1:] == ["\\patchcmd{<command>}{<search>}{<replace>}",
                                     "The assignment is local. This command is robust."]
    assert S.context_text(cands).count("\\patchcmd") == 1


def test_a_quote_opening_on_a_short_line_is_paged_by_its_next_unit():
    """A quote whose first unit is too short to find on a page ("system)", a table's wrapped
    cell) takes the page of its first unit that is found (debian-reference's systemctl table
    had no page), never a page outside its section's."""
    from engine.answer.passages.pages import _norm, locate_page

    pages = [_norm(t) for t in (
        "Chapter 3. The system initialization. Operation and command snippets.",
        "Set default-target to graphical (GUI system) systemctl set-default graphical Set "
        "default-target to multi-user (CLI system) systemctl set-default multi-user",
        "Show the job environment: systemctl show-environment")]
    body = ("system)\nsystemctl set-default graphical\nSet default-target to multi-user (CLI "
            "system) systemctl set-default multi-user")
    sents = S.candidates([S.SectionText(rid=1, doc_id=1, node_id=10, heading="Operation",
                                        page_start=1, page_end=3, body=body)])
    assert sents[0].text == "system)"
    question = "How do I make the system boot to multi-user by default?"
    ranked = S.score(None, Question.read(question), sents)
    ranked.sort(key=lambda s: s.index != 0)  # the short line ranked first, as it was
    page_of = lambda s: locate_page(s.text, s.page_start, s.page_end, pages)  # noqa: E731
    assert page_of(sents[0]) is None  # too short to look for
    q = quoting.choose(ranked, threshold=0.0, page_of=page_of)
    assert q.text.startswith("system)\nsystemctl set-default graphical") and q.page == 2


def test_three_passages_the_quote_first_none_overlapping(encoder):
    question = "Which power supply voltage does a large widget need?"
    r = ranked(encoder, question)
    quote = quoting.choose(r, threshold=0.0)
    shown = quoting.passages(quote, r, threshold=0.0)
    assert 1 < len(shown) <= quoting.PASSAGES
    assert shown[0] is quote
    for i, a in enumerate(shown):
        for b in shown[i + 1:]:  # each passage is another part of the manual
            assert a.text not in b.text and b.text not in a.text
    assert quoting.passages(None, r) == []  # no quote, no passages
    best = shown[1].score
    assert quoting.passages(quote, r, threshold=best + 1e-6) == [quote]  # none below the bar
