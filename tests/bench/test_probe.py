"""The practical dev probe: its question file against the manuals' real pages, and its verdicts."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from bench.probe import check_questions, pick, rates, round_robin, summary_table
from bench.probe_set import (KINDS, ProbeAnswer, ProbeQuestion, fragment, holds, judge,
                             key_on_pages, load_manuals, load_questions, manual_pdf, normal,
                             size_bucket)

# Held back (their questions are unseen) or reserved for evaluation: never in the probe
HELD_BACK = ("r-intro", "why3", "gnuplot", "ngspice", "pseudo")
RESERVED_PACKAGES = ("texlive-latex-recommended-doc", "git-doc")


@pytest.fixture(scope="module")
def manuals():
    return load_manuals()


@pytest.fixture(scope="module")
def questions(manuals):
    return load_questions(manuals=manuals)


def test_the_question_file_is_as_the_issue_asks(manuals, questions):
    per_manual = Counter(q.manual for q in questions)
    assert len(questions) >= 120
    assert set(per_manual) == set(manuals) and len(manuals) >= 12
    assert sum(1 for m in manuals.values() if m.bucket == "over 400 pages") >= 5
    assert min(per_manual.values()) >= 6  # spread over every manual
    for name in ("beamer", "reportlab", "etoolbox", "camlidl"):  # the corpus dev manuals
        assert manuals[name].package is None
    assert {q.kind for q in questions} <= set(KINDS)
    assert {"how", "which-option", "default", "what-does"} <= {q.kind for q in questions}
    for q in questions:
        assert q.pages, f"{q.id} has no gold page"
        assert q.pattern.pattern == q.key  # compiled as given
    # questions come from across each manual, not its first chapter only
    for name, m in manuals.items():
        pages = [p for q in questions if q.manual == name for p in q.pages]
        assert max(pages) - min(pages) >= m.pages / 4, name


def test_no_held_back_manual_nor_reserved_package(manuals):
    for m in manuals.values():
        assert not any(h in m.path for h in HELD_BACK), m.path
        assert m.package not in RESERVED_PACKAGES


def test_every_corpus_key_matches_its_gold_page(manuals, questions, shared_dir):
    corpus = [q for q in questions if manuals[q.manual].package is None]
    assert len(corpus) >= 30
    assert check_questions(corpus, manuals) == []


def test_every_debian_key_matches_its_gold_page(manuals, questions):
    debian = [q for q in questions if manuals[q.manual].package is not None]
    try:
        pdfs = {m: manual_pdf(manuals[m], fetch=False) for m in {q.manual for q in debian}}
    except FileNotFoundError as e:
        pytest.skip(f"Debian manuals not fetched (python -m bench.probe --check-only): {e}")
    for q in debian:
        assert all(key_on_pages(q, pdfs[q.manual]).values()), q.id


def test_a_key_on_a_real_page_and_off_another(manuals, shared_dir):
    pdf = manual_pdf(manuals["etoolbox"])
    q = ProbeQuestion("t", "etoolbox", "?", r"initial state of newly defined flags is false",
                      (16,), "default")
    assert key_on_pages(q, pdf) == {16: True}
    assert key_on_pages(ProbeQuestion("t", "etoolbox", "?", q.key, (4,), "default"), pdf) == {4: False}


# -- verdicts on hand-made answers ---------------------------------------------------------------

Q = ProbeQuestion("zsh-x", "zsh", "What are the default characters of IFS?",
                  r"by default space, tab, newline and NUL", (100,), "default")


def test_normal_text_ignores_line_breaks_and_ligatures():
    assert normal("Internal ﬁeld separators (by default space,\n  tab, newline\nand NUL)") == \
        "Internal field separators (by default space, tab, newline and NUL)"
    assert holds(Q, "IFS: Internal field separators (BY DEFAULT space,\ntab, newline and NUL)")
    assert not holds(Q, "by default space and tab")
    assert not holds(Q, None)


def test_judge_a_right_quote_on_its_page():
    quote = "Internal field separators (by default space, tab, newline and NUL), that are used"
    v = judge(Q, ProbeAnswer(text=quote, quote=quote, quote_page=100))
    assert (v.quote_holds, v.quote_page, v.answer_holds) == (True, True, True)
    assert not v.marked and not v.wrong_unmarked and not v.right_flagged


def test_judge_a_wrong_answer_shown_unmarked_and_one_flagged():
    a = ProbeAnswer(text="IFS is a colon.", quote="HOME The default argument for cd.",
                    quote_page=100, flagged=False, folded=False)
    v = judge(Q, a)
    assert (v.quote_holds, v.quote_page, v.answer_holds) == (False, True, False)
    assert v.wrong_unmarked and not v.marked
    flagged = judge(Q, ProbeAnswer(text="IFS is a colon.", quote=None, quote_page=None,
                                   flagged=True, folded=True))
    assert flagged.marked and not flagged.wrong_unmarked and not flagged.quote_holds
    # flagged but shown unfolded (the check's score decides): no mark on the screen
    shown = judge(Q, ProbeAnswer(text="IFS is a colon.", quote=None, quote_page=None,
                                 flagged=True, folded=False))
    assert shown.wrong_unmarked and not shown.marked
    not_covered = judge(Q, ProbeAnswer(text="The manual does not cover this.", quote=None,
                                       quote_page=None, not_covered=True))
    assert not_covered.marked and not not_covered.wrong_unmarked


def test_judge_a_right_answer_flagged_and_a_quote_on_the_wrong_page():
    right = "By default space, tab, newline and NUL."
    v = judge(Q, ProbeAnswer(text=right, quote=right, quote_page=12, flagged=True, folded=True))
    assert v.answer_holds and v.right_flagged and v.quote_holds and v.quote_page is False
    no_gold = ProbeQuestion("x", "zsh", "?", Q.key, (), "default")
    assert judge(no_gold, ProbeAnswer(text=right, quote=right, quote_page=12)).quote_page is None


def test_a_fragment_is_a_short_quote_that_is_no_command_line():
    assert fragment("The") and fragment("See below.")
    assert not fragment("scons -c") and not fragment("\\patchcmd") and not fragment("~/.zshrc")
    assert not fragment("Use the serif theme.") and not fragment(None)
    assert judge(Q, ProbeAnswer(text="The", quote="The", quote_page=1)).quote_fragment


# -- summary -------------------------------------------------------------------------------------

def test_size_buckets():
    assert [size_bucket(p) for p in (26, 149, 150, 400, 401, 1158)] == [
        "under 150 pages", "under 150 pages", "150-400 pages", "150-400 pages",
        "over 400 pages", "over 400 pages"]


def _row(manual, bucket, mode, quote_holds, answer_holds, wrong_unmarked, ms):
    return {"manual": manual, "bucket": bucket, "mode": mode, "timings_ms": {"wall": ms},
            "route": {"gold_page_selected": True},
            "verdict": {"quote_holds": quote_holds, "quote_page": None,
                        "answer_holds": answer_holds, "wrong_unmarked": wrong_unmarked,
                        "right_flagged": False, "marked": False, "quote_fragment": False}}


def test_rates_and_tables_count_what_they_say(manuals):
    rows = [_row("zsh", "over 400 pages", "quote", True, True, False, 100),
            _row("zsh", "over 400 pages", "quote", False, False, True, 300),
            _row("camlidl", "under 150 pages", "quote", True, True, False, 200)]
    s = rates(rows)
    assert s["n"] == 3 and s["quote_holds"] == (2, 3) and s["wrong_unmarked"] == (1, 3)
    assert s["quote_page"] == (0, 0) and s["median_ms"] == 200 and s["route_gold"] == 1.0
    table = summary_table(rows, "bucket", manuals)
    assert "| quote | over 400 pages | 2 | 1/2 (50%) | - | 1/2 (50%) | 1/2 (50%)" in table
    assert "| quote | **all** | 3 | 2/3 (67%)" in table
    by_manual = summary_table(rows, "manual", manuals)
    assert "| quote | camlidl (26 p.) | 1 | 1/1 (100%)" in by_manual


def test_pick_limits_per_manual(questions):
    got = pick(questions, ["zsh", "pari"], 3)
    assert Counter(q.manual for q in got) == {"zsh": 3, "pari": 3}
    assert len(pick(questions, None, None)) == len(questions)



def test_round_robin_takes_each_manual_in_turn(questions):
    got = round_robin(pick(questions, ["camlidl", "zsh"], 3))
    assert [q.manual for q in got] == ["camlidl", "zsh"] * 3
    assert [q.id for q in got if q.manual == "zsh"] == ["zsh-01", "zsh-02", "zsh-03"]


def test_a_resumed_run_keeps_its_rows_and_drops_a_cut_line(tmp_path, questions):
    from bench.probe import kept_rows

    a, b = questions[0], questions[1]
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"id": a.id, "mode": "text"}) + "\n"
                    + json.dumps({"id": "other-01", "mode": "text"}) + "\n"
                    + '{"id": "' + b.id + '", "mo')  # cut by a kill
    kept = kept_rows(path, [a, b], ["text"])
    assert [r["id"] for r in kept] == [a.id]
    assert path.read_text() == json.dumps({"id": a.id, "mode": "text"}) + "\n"
    assert kept_rows(tmp_path / "none.jsonl", [a], ["text"]) == []
