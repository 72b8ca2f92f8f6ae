"""The answer check on real manual text: invented names are flagged, copied ones are not.

Contexts are windows of six sentences from pages of four corpus manuals that are in no dev set
(gnuplot, ngspice, R, Why3), read with PyMuPDF. Each answer copies three sentences of its context,
some of their terms rewritten as a model writes them (in backticks, another dash, another case,
backslashes doubled), and adds one sentence naming one invented option, identifier, command or
number. The done-when: every invented term flagged, at most 5% of the copied terms flagged.
"""
from __future__ import annotations

import random
import re
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.answer.checks.terms import Term
from engine.answer.checks.check import (Check, NumberConflict, check_answer,
                                 denies_coverage, number_conflict)
from engine.answer.passages.units import split_sentences
from engine.answer.question import Question
from engine.answer.checks.terms import contains, find_terms, normalize

MANUALS = {"gnuplot-manual.pdf": range(30, 120, 6), "ngspice-manual.pdf": range(40, 400, 24),
           "r-intro.pdf": range(10, 100, 6), "why3-manual.pdf": range(15, 150, 9)}
ANY = Question.read("?")  # a question that asks for nothing in particular
TEMPLATES = {"option": "You can also pass {} to get this.", "identifier": "Then call {} on it.",
             "command": "Put {} before it.", "number": "The value to use is {}."}


@pytest.fixture(scope="module")
def contexts(shared_dir) -> list[str]:
    """Six-sentence windows, one per sampled page, each with at least five terms in sentences
    two to four (the ones the answers copy)."""
    import pymupdf

    out = []
    for name, pages in MANUALS.items():
        with pymupdf.open(shared_dir / "corpus" / name) as doc:
            for p in pages:
                sents = split_sentences(doc[p].get_text())
                for i in range(max(0, len(sents) - 5)):
                    if len(find_terms(" ".join(sents[i + 1:i + 4]))) >= 5:
                        out.append(" ".join(sents[i:i + 6]))
                        break
    assert len(out) >= 40, "too few contexts with terms"
    return out


def _respelled(term, rng: random.Random) -> str:
    """A term as a model may rewrite it: in backticks, with its dashes or case changed, or its
    backslash doubled."""
    t = term.text
    choice = rng.randrange(4)
    if choice == 0:
        return f"`{t}`"
    if choice == 1 and t.startswith("-"):
        return rng.choice(["\u2013", "\u2014", "--", "-"]) + t.lstrip("-\u2013\u2014")
    if choice == 2 and term.kind != "number":
        return t.upper() if rng.random() < 0.5 else t.lower()
    if choice == 3 and t.startswith("\\"):
        return "\\" + t
    return t


def _invent(kind: str, context: str, rng: random.Random) -> str:
    """A term of ``kind`` that ``context`` does not hold, made from its own words where it can
    (as a model bends a name it has read: ``\\pretocmd`` -> ``\\pretenstion``)."""
    norm = normalize(context)
    words = [w.lower() for w in re.findall(r"[A-Za-z]{4,}", context)] or ["value"]
    for _ in range(100):
        w = rng.choice(words)
        w2 = w[:-1] + "".join(rng.choice(string.ascii_lowercase) for _ in range(3))
        term = {"option": f"--{w2}", "identifier": f"{w}_{rng.choice(words)}x",
                "command": f"\\{w2}", "number": str(rng.randrange(1000, 99999))}[kind]
        if not contains(norm, normalize(term).lstrip("\\")):
            return term
    raise AssertionError("no invented term found")


def _answer(context: str, kind: str, rng: random.Random) -> tuple[str, str, int]:
    """(answer, invented term, how many copied terms it holds)."""
    sents = split_sentences(context)
    copied = " ".join(sents[1:4])
    for term in sorted(find_terms(copied), key=lambda t: -t.start):
        if rng.random() < 0.5:
            copied = copied[:term.start] + _respelled(term, rng) + copied[term.end:]
    invented = _invent(kind, context, rng)
    return f"{copied} {TEMPLATES[kind].format(invented)}", invented, len(find_terms(copied))


def test_invented_terms_are_flagged_and_copied_ones_are_not(contexts):
    rng = random.Random(38)
    copied_total = copied_flagged = 0
    missed = []
    for i, context in enumerate(contexts):
        kind = list(TEMPLATES)[i % len(TEMPLATES)]
        answer, invented, n_copied = _answer(context, kind, rng)
        start = answer.rindex(invented)
        result = check_answer(answer, [context], Question.read("How do I do this?"))
        spans = {(u.start, u.end) for u in result.unsupported}
        if (start, start + len(invented)) not in spans:
            missed.append((invented, answer))
        wrong = [u for u in result.unsupported if u.start < start]
        copied_total += n_copied
        copied_flagged += len(wrong)
    assert not missed, f"invented terms not flagged: {missed[:3]}"
    assert copied_total >= 250
    assert copied_flagged <= 0.05 * copied_total, (copied_flagged, copied_total)


def test_sources_are_the_context_the_quote_and_the_question():
    answer = "Use \\pretocmd with --force on main.tex."
    assert {u.text for u in check_answer(answer, [], Question.read("How?")).unsupported} == {
        "\\pretocmd", "--force", "main.tex"}
    found = check_answer(answer, ["\\pretocmd prepends"], Question.read("Can --force be used?"),
                         quote="Compile main.tex twice.")
    assert found.unsupported == [] and not found.flagged and found.checked == 3


def test_spans_point_into_the_answer_and_the_line_names_the_terms():
    answer = "Run `ngspice -c` and then set exit_code to 0."
    result = check_answer(answer, ["ngspice reads the circuit; it exits with 0 on success."],
                          Question.read("How do I run ngspice?"))
    assert [(u.text, u.kind) for u in result.unsupported] == [("-c", "option"),
                                                              ("exit_code", "identifier")]
    assert all(answer[u.start:u.end] == u.text for u in result.unsupported)
    assert result.line == ("The model's answer names -c and exit_code, which the manual's "
                           "passages do not contain.")
    assert result.as_json()["unsupported"][0] == {"term": "-c", "kind": "option",
                                                  "start": 13, "end": 15}


def test_a_code_span_found_whole_is_supported_and_an_invented_operator_is_not():
    ctx = "Type opam install why3 in a shell. The pipe x |> f applies f."
    assert not check_answer("Run `opam install why3`.", [ctx], Question.read("How?")).flagged
    how = Question.read("How?")
    assert [u.text for u in check_answer("Use `x <<< f`.", [ctx], how).unsupported] == ["<<<"]
    # stop words inside code are not terms; the names are
    assert [u.text for u in check_answer("`plot f with linez`", ["plot f"], ANY).unsupported] == [
        "linez"]


def test_ordinary_words_and_acronyms_are_not_terms():
    answer = ("Patching works as follows. The PDF shows a CMYK colour, and/or a Table of "
              "Contents; I think the command is simple. Use it.")
    assert check_answer(answer, [], Question.read("How?")).checked == 0


@pytest.mark.parametrize("written,manual", [
    ("--prefix", "\u2013prefix"), ("--prefix", "\u2014prefix"), ("-prefix", "--prefix"),
    ("\u2212v", "-v"), ("\\\\patchcmd", "\\patchcmd"), ("\\PatchCmd", "\\patchcmd"),
    ("\u2018ignore\u2019", "'ignore'"), ("'ignore'", "\u201cignore\u201d"),
    ("`\\newrobustcmd`", "\\newrobustcmd*"), ("set_wire_rc", "SET_WIRE_RC"),
    ("1,000", "1,000 items"), ("~/.reportlab_settings", "in ~/.reportlab_settings."),
])
def test_terms_are_compared_as_manuals_write_them(written, manual):
    assert not check_answer(f"Use {written} here.", [manual], ANY).flagged


@pytest.mark.parametrize("written,manual", [
    ("1", "version 1.5"), ("-c", "a-c"), ("why3", "why33"), ("\\foo", "\\foobar"),
    ("x86", "x86_64"),
])
def test_a_term_inside_a_longer_one_is_not_support(written, manual):
    assert check_answer(f"Use {written} here.", [manual], ANY).flagged


@pytest.mark.parametrize("answer", [
    "The manual does not say.", "The context does not provide information about exit codes.",
    "This is not mentioned in the provided context.", "There is no information about that.",
    "I don't know the answer from the sections given.",
    "The provided text doesn't specify the default.",
])
def test_an_answer_denying_coverage_is_flagged_only_under_a_quote(answer):
    assert denies_coverage(answer)
    what = Question.read("What is it?")
    assert check_answer(answer, ["x"], what, quote="It is 1.").denies_coverage
    assert not check_answer(answer, ["x"], what, quote=None).flagged


@pytest.mark.parametrize("answer", [
    "The manual says to use \\patchcmd.", "It does not matter which order you use.",
    "The command does not print anything.", "No, the option is not needed.",
])
def test_ordinary_negations_do_not_deny_coverage(answer):
    assert not denies_coverage(answer)


def test_the_asked_quantity_must_match_the_quote():
    q = Question.read("What is the exit code when ngspice finds an error?")
    quote = "On an error ngspice exits with status 1."
    got = number_conflict("The exit code is 0.", quote, q)
    assert got == NumberConflict("0", "1", 17, 18)
    result = check_answer("The exit code is 0.", [quote], q, quote=quote)
    assert result.flagged and result.line == "The model's answer gives 0 where the quote says 1."
    assert number_conflict("It exits with 1.", quote, q) is None  # agrees
    assert number_conflict("It exits with an error.", quote, q) is None  # no number given
    how = Question.read("How do I run ngspice?")
    assert number_conflict("The exit code is 0.", quote, how) is None
    assert number_conflict("It is 0.", "Status 1 or 2.", q) is None  # the quote is ambiguous
    # a number the question names is not the quote's answer, nor the answer's
    assert number_conflict("Pass 3 and get 30.", "With 3 pins it takes 40ms.",
                           Question.read("How long does it take with 3 pins?")) \
        == NumberConflict("30", "40", 15, 17)


def test_a_check_with_nothing_found_is_not_flagged():
    empty = Check()
    assert not empty.flagged and empty.line is None
    many = Check(unsupported=[Term(f"t{i}", "identifier", i, i + 2) for i in range(6)])
    assert many.line.startswith("The model's answer names t0, t1, t2, t3 and 2 more")


# -- properties ----------------------------------------------------------------------------------

_text = st.text(alphabet=string.ascii_letters + string.digits + " _-\\.`'\"/()\n\u2013\u2014:<>|",
                max_size=120)


@given(_text)
def test_term_spans_are_the_terms_as_written(text):
    found = find_terms(text)
    assert all(text[t.start:t.end] == t.text and t.key for t in found)
    assert all(a.end <= b.start for a, b in zip(found, found[1:]))


@given(_text)
def test_normalize_is_idempotent(text):
    assert normalize(normalize(text)) == normalize(text)


@given(_text)
def test_an_answer_copied_whole_from_its_source_is_never_flagged(text):
    """Every term of a text is found in that same text."""
    assert check_answer(text, [text], ANY).unsupported == []


_name = st.from_regex(r"[a-z]{3,8}_[a-z]{3,8}", fullmatch=True)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(st.data())
def test_a_name_absent_from_the_context_is_flagged_wherever_it_stands(contexts, data):
    context = data.draw(st.sampled_from(contexts))
    name = data.draw(_name.filter(lambda n: not contains(normalize(context), n)))
    sents = split_sentences(context)
    at = data.draw(st.integers(0, len(sents)))
    answer = " ".join(sents[:at] + [f"Call {name}() here."] + sents[at:])
    start = answer.index(name)
    assert Term(name, "identifier", start, start + len(name)) in check_answer(
        answer, [context], ANY).unsupported


def test_a_term_cut_short_by_the_token_limit_is_left_out():
    answer = "Set reportlab.rl_config and then reportlab.loc"
    ctx = ["reportlab.rl_config and reportlab.local_settings"]
    assert [u.text for u in check_answer(answer, ctx, ANY).unsupported] == ["reportlab.loc"]
    assert check_answer(answer, ctx, ANY, cut=True).unsupported == []
    assert check_answer("Use --frob here", ctx, ANY, cut=True).unsupported[0].text == "--frob"
