"""engine.answer.passages.units on real manual text (the corpus' PDFs, parsed as ingest parses them)."""
from __future__ import annotations

from engine.answer.passages.units import (introduces, is_code_line, join_short_pieces, leans,
                                         split_units)


def _section(tree, title):
    return next(n for n in tree.preorder() if n.title == title)


def test_why3_install_sentence_takes_its_command_line(corpus_tree):
    n = _section(corpus_tree("why3-manual.pdf"), "Installation via Opam")
    units = split_units(n.text, n.title)
    texts = [u.text for u in units]
    assert "It is as simple as\nopam install why3" in texts  # the line the sentence introduces
    intro = units[texts.index("It is as simple as\nopam install why3")]
    assert intro.kind == "intro" and intro.leans  # "It" refers to the sentence before
    assert texts[texts.index(intro.text) - 1].startswith("The simplest way to install Why3 is via Opam")
    assert any(t.endswith("which can be installed using\nopam install why3-ide") for t in texts)
    assert not any(t.endswith("Installation via Opam") for t in texts)  # the heading is no unit


def test_r_help_command_and_alternative(corpus_tree):
    n = _section(corpus_tree("r-intro.pdf"), "Getting help with functions and features")
    texts = [u.text for u in split_units(n.text, n.title)]
    assert any(t.endswith("the command is\n> help(solve)") for t in texts)
    assert "An alternative is\n> ?solve" in texts
    assert '> help("[[")' in texts  # a short line after a finished sentence: a unit of its own


def test_a_long_block_stays_line_by_line():
    body = ("The options are as follows:\n\n-a all files\n-b brief\n-c count\n-d debug\n\n"
            "Each option may be repeated.")
    units = split_units(body)
    assert [u.kind for u in units] == ["sentence", "line", "line", "line", "line", "sentence"]
    assert units[1].text == "-a all files"


def test_line_and_sentence_cues():
    assert is_code_line("> help(solve)") and is_code_line("opam install why3")
    assert not is_code_line("Then jump to Section 5.2 to install external provers.")
    assert introduces("It is as simple as") and introduces("The syntax is as follows.")
    assert introduces("Type the following:") and not introduces("It works.")
    assert leans("It provides OCaml bindings.") and leans("For example, use -v.")
    assert leans("which will launch a Web browser.") and not leans("Why3 provides a GUI.")


def test_markdown_fences_are_not_units_and_their_code_is_introduced():
    body = ("The first step is to download the repository:\n\n``` shell\n"
            "git clone --recursive https://github.com/The-OpenROAD-Project/OpenROAD.git\n"
            "cd OpenROAD\n```\n\nSubmodules are located in `src/`.")
    texts = [u.text for u in split_units(body)]
    assert texts[0] == ("The first step is to download the repository:\ngit clone --recursive "
                        "https://github.com/The-OpenROAD-Project/OpenROAD.git\ncd OpenROAD")
    assert not any("```" in t for t in texts)


def test_a_definition_lists_short_term_stays_with_its_description():
    body = ("autostart. Causes the sound to start playing immediately when the page is shown. "
            "Default: off.\n\nmute. Causes all sounds to be muted when the page is left.")
    texts = [u.text for u in split_units(body)]
    assert texts == ["autostart. Causes the sound to start playing immediately when the page is "
                     "shown. Default: off.",
                     "mute. Causes all sounds to be muted when the page is left."]
    assert join_short_pieces(["Note.", "It holds."]) == ["Note. It holds."]  # under four words


# -- sentences that hold abbreviations and page references; entries as units -------------------

def test_a_sentence_with_an_abbreviation_or_a_page_reference_stays_whole():
    from engine.answer.passages.units import sentence_pieces, split_sentences

    text = ("Options are given as keys, e.g. \\usetheme. See p. 12 for the list of keys, and "
            "pp. 3-4 for examples. Fig. 3 shows it; cf. Section 2.1 as well. It ends here etc. "
            "The next sentence.")
    assert sentence_pieces(text) == [
        "Options are given as keys, e.g. \\usetheme.",
        "See p. 12 for the list of keys, and pp. 3-4 for examples.",
        "Fig. 3 shows it; cf. Section 2.1 as well.", "It ends here etc.", "The next sentence."]
    assert "See p. 12 for the list of keys, and pp. 3-4 for examples." in split_sentences(text)


def test_a_word_broken_at_a_line_end_is_joined_and_code_keeps_its_hyphen(corpus_tree):
    from engine.document.builders.pdf_pages import dehyphenated

    n = next(n for n in corpus_tree("etoolbox-manual.pdf").preorder()
             if n.title == "Patching" and "3.4" in n.text)
    assert "All commands presented here" in " ".join(n.text.split())
    assert "com- mands" not in " ".join(n.text.split())
    assert dehyphenated("the --with-", "libfoo") is None  # an option broken at its own dash
    assert dehyphenated("a LaTeX-", "based") is None and dehyphenated("it com-", "mands") == "it com"


def _quote_of(tree, title, best_text):
    """The quote chosen when the unit ``best_text`` of section ``title`` scores best."""
    from engine.answer.passages import quote as quoting
    from engine.answer.passages.sentences import SectionText, candidates

    n = _section(tree, title)
    sents = candidates([SectionText(1, 1, n.id, f"Manual > {n.title}", n.text, n.page_start,
                                    n.page_end)])
    for s in sents:
        s.score = 1.0 if s.text.startswith(best_text) else 0.0
    ranked = sorted(sents, key=lambda s: -s.score)
    assert ranked[0].score == 1.0, f"no unit starts with {best_text!r}"
    return quoting.choose(ranked, 0.5), ranked[0]


def test_a_definition_entry_is_quoted_from_its_signature_line(corpus_tree):
    """etoolbox sets a command's signature in the left column and its description indented
    beside it: the quote of a sentence deep in the description starts at the signature."""
    quote, best = _quote_of(corpus_tree("etoolbox-manual.pdf"), "\\patchcmd",
                            "The category code of the @ sign is temporarily set to 11.")
    assert best.index > 0 and best.head == 0
    assert quote.text.startswith("\\patchcmd[⟨prefix⟩]{⟨command⟩}{⟨search⟩}")
    assert "set to 11" in quote.text
    units = split_units(_section(corpus_tree("etoolbox-manual.pdf"), "\\patchcmd").text)
    assert units[0].kind == "entry" and units[0].text.splitlines()[1].startswith(
        "This command extracts the replacement text")


def test_a_beamer_command_entry_is_quoted_from_its_signature(corpus_tree):
    quote, _ = _quote_of(corpus_tree("beamer-userguide.pdf"), "14.2 Sounds",
                         "Unlike \\movie, you can however use the option inlinesound")
    assert quote.text.startswith("\\sound[⟨options⟩]{⟨sound poster text⟩}{⟨sound filename⟩}\n")
    assert "inlinesound" in quote.text


def test_a_right_margin_default_stays_with_its_own_key(corpus_tree):
    """pseudo's key reference prints "(no default, initially empty)" at the right margin of
    the key's line: it stays on that key's signature, not on the next key's name."""
    n = _section(corpus_tree("pseudo-manual_no-outline.pdf"), "4.2 Command and key reference")
    texts = [u.text for u in split_units(n.text)]
    assert ("bol = ⟨commands⟩ (no default, initially empty)\nUsed to set \\pseudobol, which is "
            "inserted at the beginning of each line.") in texts
    assert any(t.startswith("bol-append = ⟨commands⟩ (no default)\nLocally appends") for t in texts)
    assert not any("(no default) bol" in t or "empty) bol" in t for t in texts)


def test_an_html_definition_list_item_is_one_entry(tmp_path):
    from engine.document.builders import build_raw_tree

    page = tmp_path / "tool.html"
    page.write_text(
        "<html><body><h1>Options</h1><p>The tool takes these options.</p><dl>"
        "<dt><code>--color=WHEN</code></dt><dd>Colorize the output. WHEN is always, never or "
        "auto. The default is auto, which colors only a terminal.</dd>"
        "<dt><code>-q</code>, <code>--quiet</code></dt><dd>Print nothing.</dd></dl>"
        "<p>To install it, run:</p><pre>make\nmake install</pre></body></html>")
    node = next(n for n in build_raw_tree(page).preorder() if n.title == "Options")
    units = split_units(node.text, node.title)
    entry = next(u for u in units if u.text.startswith("--color=WHEN"))
    assert entry.kind == "entry" and entry.text.startswith("--color=WHEN\nColorize the output.")
    default = next(u for u in units if u.text.startswith("The default is auto"))
    assert units[default.head] is entry and default.entry == "--color=WHEN"
    assert "To install it, run:\nmake\nmake install" in [u.text for u in units]
    quote, _ = _quote_of(build_raw_tree(page), "Options", "The default is auto")
    assert quote.text.startswith("--color=WHEN\nColorize the output.")


def test_list_items_steps_and_a_faq_answer_are_entries():
    body = ("How do I frob the widget?\n\nYou frob it with the frobber. It takes two minutes "
            "to do.\n\n1. Download the file from the site.\n2. Run make in the folder.\n"
            "3. Run make install as root.\n\nSome prose here that is long enough. And another "
            "sentence that follows it here.")
    units = split_units(body)
    heads = {u.text: units[u.head].text for u in units}
    assert heads["It takes two minutes to do."] == "How do I frob the widget?"
    assert heads["3. Run make install as root."] == "1. Download the file from the site."
    assert heads["And another sentence that follows it here."] == (
        "And another sentence that follows it here.")  # inside a paragraph: its own unit
