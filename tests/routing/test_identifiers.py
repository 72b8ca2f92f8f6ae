"""engine.routing.identifiers: run-together and camel-case names read as words, in the lexical
channel's tokens and for the encoder."""
from __future__ import annotations

from engine.routing.identifiers import as_words, split_words
from engine.routing.lexical import tokenize


def test_run_together_and_camel_case_names_split():
    assert split_words("\\patchcmd") == ["patch", "cmd", "command"]
    assert split_words("\\AtBeginEnvironment") == ["at", "begin", "environment"]
    assert split_words("allowframebreaks") == ["allow", "frame", "breaks"]
    assert split_words("together") == [] and split_words("csdef") == []  # a word; too short
    assert split_words("robustify") == []  # a cut with a one-letter piece is no cut


def test_the_lexical_channel_reads_the_words_of_a_name():
    toks = tokenize("\\patchcmd")
    assert {"\\patchcmd", "patch", "command"} <= set(toks)
    assert set(tokenize("How do I patch a command?")) <= set(toks)
    assert "frame" in tokenize("allowframebreaks") and tokenize("Why3") == ["why3"]


def test_as_words_appends_the_words_for_the_encoder():
    assert as_words("Patching > \\patchcmd") == "Patching > \\patchcmd (patch cmd command)"
    assert as_words("Installation via Opam") == "Installation via Opam"
