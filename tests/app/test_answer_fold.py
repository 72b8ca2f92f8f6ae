"""A checked answer's Markdown: unsupported terms marked, a flagged answer folded."""
from __future__ import annotations

import html

import markdown_it
from hypothesis import given
from hypothesis import strategies as st

from app.ask.answer_fold import answer_markdown, folded, marked_answer
from engine.answer.checks.check import check_answer
from engine.answer.question import Question


def _spans(text: str, *terms: str) -> list[tuple[int, int]]:
    return [(text.index(t), text.index(t) + len(t)) for t in terms]


def test_a_term_in_prose_is_marked_and_read_as_no_markup():
    text = "Use \\pretenstion or exit_code_x, then `\\pretocmd`."
    md = marked_answer(text, _spans(text, "\\pretenstion", "exit_code_x"))
    assert md == ("Use <mark>&#92;pretenstion</mark> or <mark>exit&#95;code&#95;x</mark>, then "
                  "`\\pretocmd`.")
    rendered = markdown_it.MarkdownIt("commonmark").render(md)
    assert "<mark>\\pretenstion</mark>" in rendered and "<mark>exit_code_x</mark>" in rendered


def test_a_term_in_code_becomes_html_code_with_the_mark_inside():
    text = "Run `ngspice -c <file>` or:\n```\nngspice -c\n```\nDone."
    first = text.index("-c")
    second = text.index("-c", first + 1)
    md = marked_answer(text, [(first, first + 2), (second, second + 2)])
    assert "<code>ngspice <mark>-c</mark> &lt;file&gt;</code>" in md
    assert "<pre><code>ngspice <mark>-c</mark>\n</code></pre>" in md
    assert md.endswith("\nDone.")


def test_a_term_in_a_fence_left_open_is_marked_as_code():
    text = "Use it:\n```r\nx = data_frame_to_list(y"
    s = text.index("data_frame_to_list")
    md = marked_answer(text, [(s, s + len("data_frame_to_list"))])
    assert md == "Use it:\n\n<pre><code>x = <mark>data_frame_to_list</mark>(y</code></pre>\n"


def test_an_unflagged_answer_is_its_text():
    assert answer_markdown("Use `\\patchcmd`.", []) == "Use `\\patchcmd`."


def test_a_flagged_answer_is_folded_under_its_line():
    answer = "Pass --frob to ngspice."
    check = check_answer(answer, ["ngspice reads a netlist."], Question.read("How?")).as_json()
    md = answer_markdown(answer, check["unsupported"], check["line"])
    # said as the model's reading, folded (issue 67), then the line saying why
    label = '<p class="fold-label">The model&#x27;s reading of the passages below, folded: '
    assert md.startswith(label)
    assert ('<details class="answer-fold"><summary>The model&#x27;s answer names --frob, which '
            "the manual&#x27;s passages do not contain.</summary>") in md
    assert "Pass <mark>--frob</mark> to ngspice." in md and md.endswith("</details>")
    assert '<details class="answer-fold"><summary>a &lt; b<' in folded("a < b", "x")


@given(st.text(alphabet="ab `\n-_\\*", max_size=40), st.data())
def test_marking_keeps_every_character_outside_the_marks(text, data):
    """Removing the marks and entities from the prose gives the text back (no code in it)."""
    text = text.replace("`", "'")
    if not text:
        return
    s = data.draw(st.integers(0, len(text) - 1))
    e = data.draw(st.integers(s + 1, len(text)))
    md = marked_answer(text, [(s, e)])
    assert html.unescape(md.replace("<mark>", "").replace("</mark>", "")) == text
