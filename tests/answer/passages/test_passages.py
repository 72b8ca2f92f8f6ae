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
