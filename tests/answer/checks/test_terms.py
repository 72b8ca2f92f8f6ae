"""engine.answer.checks.terms: key terms of manual-style text and their recall."""
from hypothesis import given, strategies as st

from engine.answer.checks.terms import contains, key_terms, normalize, recall


def test_identifiers_options_numbers_and_code():
    text = ("1. Run `report_wns` then estimate_parasitics -placement; set "
            "emptyTableAction to 'ignore' in ~/.reportlab_settings (section 4.3.3, value 6).")
    terms = key_terms(text)
    assert terms[:3] == ["report_wns", "estimate_parasitics", "-placement"]
    for t in ("emptytableaction", "ignore", "~/.reportlab_settings", "4.3.3", "6"):  # a path whole
        assert t in terms
    assert "1" not in terms  # a list marker is not a term
    assert "run" not in terms and "section" not in terms  # plain prose is not


def test_code_block_words_and_comments():
    text = "Install it:\n```shell\nopam install why3  # the latest release\n```\nDone."
    assert key_terms(text) == ["opam", "install", "why3"]


def test_tex_commands_calls_and_inline_triple_backticks():
    assert key_terms(r"\newrobustcmd differs from \DeclareRobustCommand.") == [
        "newrobustcmd", "declarerobustcommand"]
    assert key_terms("Type help(solve) or ?solve") == ["help"]
    text = "You did not give ```-max_displacement```. The ```-max_displacement``` option is"
    assert key_terms(text) == ["-max_displacement"]


def test_normaliser_case_backslash_dashes_quotes():
    assert normalize("\\PatchCmd \u2013max\u2212x \u201cA\u201d \u2018b\u2019") == "patchcmd -max-x \"a\" 'b'"
    assert recall(key_terms(r"Use \appto and --help"), "use APPTO with \u2013-help") == 1.0


def test_recall_at_token_boundaries():
    norm = normalize("set_dont_use DLY* and report_tns")
    assert contains(norm, "set_dont_use") and contains(norm, "dly")
    assert not contains(norm, "set_dont")  # a prefix of a longer identifier is not the term
    assert recall(["report_tns", "report_wns"], "report_tns only") == 0.5
    assert recall([], "anything") is None


@given(st.text(max_size=80))
def test_normalize_is_idempotent(s):
    assert normalize(normalize(s)) == normalize(s)
