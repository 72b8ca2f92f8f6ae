"""The page's lines about the state it shows, each state said once (issue 67): two lines that
describe one state read the same words from here, so they cannot disagree. Plain words only;
the paper's names (the H2MT memory router, BM25, ...) are in hover help, never here.

States and their lines:
- nothing chosen or typed: ``NO_MANUAL``, ``EMPTY_QUESTION`` (one line each, kept on the page
  until the next action);
- where the manual answers (``headline``): one clear place, more than one candidate, none;
- the page view's caption: what its highlight is (``highlighted``: the passage, or evidence
  lines);
- the evidence lines (``evidence_line``);
- a manual's memories (``memories_state``): being indexed, being written, not written;
- the model's answer shown or folded (``READING``, ``FOLDED_READING``);
- the answer check's column in the Evaluation tab (``check_word``);
- an example question file (``questions_line``);
- a manual's passages still being prepared after its upload (``preparing_passages``).
"""
from __future__ import annotations

from engine.answer.shown import NONE, ONE, SEVERAL, WEAK, plain_heading
from engine.document.tree import page_name

# -- nothing to ask yet -------------------------------------------------------------------------

NO_MANUAL = "Choose a manual first (upload one in the Library tab)."
EMPTY_QUESTION = "Type a question first."
PAGE_HINT = "Click a passage, a cited section or an evidence line to see it on its page here."

# -- where the manual answers -------------------------------------------------------------------

NOT_COVERED = ("**The manual does not seem to cover this question**: no passage of the sections "
               "found matches it closely enough. Any answer below is the model's own, without "
               "the manual.")
HEADLINES = {
    ONE: "**Where the manual answers:** one clear place, passage 1 below",
    SEVERAL: "**Where the manual answers: more than one candidate place.** Passages 1 and 2 "
             "below score alike; both are shown open, read both",
    WEAK: "**Where the manual answers: no clear place.** Passage 1 below scores low; passages "
          "1 and 2 are shown open, read both",
    NONE: NOT_COVERED,
}
FINDING = "**Where the manual answers:** passage 1 below"  # before the others are known


def where(p: dict, heading: bool = True) -> str:
    """"Patching, p. 8" of a passage (its JSON), with "read by OCR" for a scanned page
    (``heading`` False: its page alone, "page unknown" without one)."""
    page = page_name(p["page"], p.get("page_label")) if p.get("page") else ""
    parts = ([plain_heading(p.get("heading")) or "the manual"] if heading
             else [] if page else ["page unknown"]) + [page]
    if p.get("ocr"):
        parts.append("read by OCR from a scanned page")
    return ", ".join(x for x in parts if x)


def headline(quote: dict | None, not_covered: bool, verdict: str | None = None) -> str:
    """The line above the answer: where the manual answers (``verdict``: ``Places.verdict``;
    None while only the quote is known)."""
    if quote is None:
        return NOT_COVERED if not_covered else ""
    if verdict == NONE:
        verdict = ONE
    head = HEADLINES[verdict] if verdict is not None else FINDING
    # its page only: passage 1 names its section (one line at 1440 pixels)
    return f"{head} ({md(where(quote, heading=False))})."


def md(text: str) -> str:
    """Markdown-safe inline text (the manual's words shown as they are)."""
    for ch in "\\`*_[]<>#|":
        text = text.replace(ch, "\\" + ch)
    return text


# -- table headers ------------------------------------------------------------------------------
# a row's manual and section ids (what a selected row opens), in plain words
MANUAL_COL, SECTION_COL = "manual", "section"
# where the two ways of finding sections disagree: each one's column
ALL_CLUES_COL, MEMORIES_COL = "by all clues", "by memories"

# -- the page view ------------------------------------------------------------------------------

def highlighted(found: int, total: int, what: str) -> str:
    """The page caption's count: ``what`` is "passage" (a passage's lines) or "evidence"."""
    if what == "passage":
        return ("the passage highlighted" if found == total else
                f"{found} of {total} lines of the passage highlighted")
    return f"{found} of {total} evidence {'line' if total == 1 else 'lines'} highlighted"


# -- the evidence lines -------------------------------------------------------------------------

def evidence_line(mode: str, has_evidence: bool, degenerate: bool, n: int) -> str:
    """What the evidence table holds, or why it is empty."""
    if not has_evidence:
        return f"The {mode} mode has no evidence lines."
    if degenerate:
        return "No evidence lines: the output is not an answer."
    if not n:
        return ("No evidence lines: no sentence of the cited sections is close enough to the "
                "model's answer.")
    return (f"{n} evidence {'line' if n == 1 else 'lines'}: sentences of the cited sections "
            "closest to the model's answer; click one to see it on its page.")


# -- the answer check, in a table ---------------------------------------------------------------

def check_word(row: dict) -> str:
    """The Evaluation tab's check column: what the page did with the answer."""
    check = row.get("check")
    if check is None:
        return ""
    if check.get("flagged"):
        return "flagged"
    return "folded" if row.get("folded") else "shown"


# -- the model's answer ------------------------------------------------------------------------
# Said above a folded answer (the answer check does not support it): the model's reading, not
# the manual's fact (engine.answer.checks.verdict.folds); the answer box's label says the same
# words for an answer shown.
READING = "The model's reading of the passages below"
FOLDED_READING = f"{READING}, folded: the answer check does not support it"

# -- an answer in plain text (the Compare tab) ---------------------------------------------------

def marked_answer(text: str, generates: bool, degenerate: str | None, fold_line: str | None,
                  why: str = "") -> str:
    """An answer as a plain text box shows it: a degenerate output (a loop, debris) or a folded
    answer said so on its first line, as the Ask tab says it, never passed off as an answer."""
    if degenerate:
        return f"(not an answer: the output is not usable{f', {why}' if why else ''})\n{text}"
    if fold_line:
        return f"(not checked as right: {fold_line})\n{text}"
    return text or ("(the model wrote nothing)" if generates else "(routing only)")


# -- files of questions -------------------------------------------------------------------------

NUMBERS = ["No", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten"]


def questions_line(n: int, what: str) -> str:
    """"Five questions on the example manual, ..." from the file's own count."""
    count = NUMBERS[n] if n < len(NUMBERS) else str(n)
    return f"{count} question{'' if n == 1 else 's'} {what}"


# -- a manual's passages, prepared in the background after its upload (engine/passage_worker.py) -

READY_TO_ASK = "Ready to ask."
SLOWER_MEANWHILE = "answers are slower until then"


def preparing_passages(done: int, total: int, words_only: bool = False) -> str:
    """The words for a manual that can be asked while its passage vectors are prepared
    (``words_only``: its sections' vectors too, found by their words until then)."""
    if words_only:
        return (f"ready to ask, its sections found by their words for now; preparing their "
                f"meaning and its passages {done:,}/{total:,}")
    return f"ready to ask; preparing passages {done:,}/{total:,}"
