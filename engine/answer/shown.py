"""What a person is shown of an answer's passages, the same in the app, the CLI, the JSON, the
MCP tool and the Evaluation rows (issue 67).

- ``card``: a passage as read, two to five lines: the entry's signature first (the passage's
  first line), then its heading and printed page, then up to three more lines of its text.
- ``places``: whether the manual has one clear place for the question or more than one
  candidate: the quote's score far enough ahead of the second passage's (``CLOSE_GAP``) and
  high enough (``LOW_SCORE``), else the screen says that two places may answer and shows both
  open. The thresholds were chosen on the dev probe (docs/results.md, "The screen (issue 67)").
- ``key_line_shown``: the key line ("From the manual: ...") is shown only when it is a whole
  term of the quote's entry: the entry's signature (the quote's first line, a command line) or
  a code span of the quote (a line of code, or one of its code terms), and its page is known;
  the answer's JSON shows it only where the manual has one clear place too (``places``): a
  line of the quote is no key when the quote itself is in doubt.
- ``key_line_on_screen``: and, where the model answered, only when the answer check supports
  the answer (it is shown, not folded) and the answer names the key line's term: the line is
  said as the manual's answer only when the quote, the model's reading and the check agree
  (chosen on the dev probe, docs/results.md "The answer check on the screen (issue 67)").
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from engine.document.tree import page_name

# -- the passages as read ------------------------------------------------------------------------

CARD_WIDTH = 100  # characters of a line of a card's text (the CLI wraps there)
CARD_TEXT_LINES = 3  # lines of text under the signature and the heading line
SIGNATURE_CHARS = 160  # a longer first line is prose, cut at a word


@dataclass(frozen=True)
class Card:
    """One passage as read: its rank (1: the quote), the signature line, where it is (heading
    and printed page) and the text after the signature."""
    rank: int
    signature: str
    heading: str
    page: str  # "p. 8", "p. 8 (PDF page 10)", "" when unknown
    body: tuple[str, ...]  # the rest of the passage, line by line

    @property
    def text(self) -> str:
        """The rest of the passage on one line (its lines joined by " / ")."""
        return " / ".join(self.body)

    def where(self) -> str:
        return ", ".join(x for x in (self.heading, self.page) if x)

    def lines(self, width: int = CARD_WIDTH, text_lines: int = CARD_TEXT_LINES) -> list[str]:
        """The card as two to five plain lines (the CLI's, the Evaluation rows')."""
        body = textwrap.wrap(self.text, width)
        if len(body) > text_lines:
            body = body[:text_lines]
            body[-1] = body[-1][: width - 2].rstrip() + " …"
        where = f"({self.where() or 'the manual'})"
        if not self.signature:  # prose: where it is, then its text
            return [f"{self.rank}. {where}", *(f"   {b}" for b in body)]
        return [f"{self.rank}. {self.signature}", f"   {where}", *(f"   {b}" for b in body)]


_PIECE = re.compile(r"\s*›\s*(part \d+ of \d+|text)$")


def plain_heading(heading: str | None) -> str:
    """A heading path as a reader says it: without the storage's label of an untitled piece
    ("Patching › part 2 of 4" -> "Patching"; storage/tree.py ``labels``)."""
    return _PIECE.sub("", heading or "").strip()


def card(p: dict, rank: int) -> Card:
    """The card of a passage (``Quote.as_json()``) ranked ``rank`` (1: the quote): its first
    line is the signature when it reads as one (a command, code or a short label line); a
    passage of prose has none, its text is all body."""
    from engine.answer.passages.units import is_code_line, is_command_line

    lines = [" ".join(x.split()) for x in (p.get("text") or "").splitlines() if x.strip()]
    first, rest = (lines[0], lines[1:]) if lines else ("", [])
    if len(first) > SIGNATURE_CHARS or not (is_command_line(first) or is_code_line(first)):
        first, rest = "", lines  # prose: no signature
    page = page_name(p["page"], p.get("page_label")) if p.get("page") else ""
    return Card(rank, first, plain_heading(p.get("heading")), page, tuple(rest))


def cards(passages: list[dict]) -> list[Card]:
    """The cards of an answer's passages (its JSON's ``passages``), in rank order."""
    return [card(p, i) for i, p in enumerate(passages, start=1)]


# -- one place or several ------------------------------------------------------------------------

# The quote's lead over the second passage under which the manual has two candidate places,
# and the quote's score under which it is weak (docs/results.md, "The screen (issue 67)").
CLOSE_GAP = 0.04
LOW_SCORE = 1.0

ONE, SEVERAL, WEAK, NONE = "one place", "several places", "weak", "none"


@dataclass(frozen=True)
class Places:
    """Where the manual answers: ``ONE`` (the quote well ahead), ``SEVERAL`` (the second
    passage's score close to the quote's), ``WEAK`` (the quote's score low), ``NONE`` (no
    quote); ``open``: how many passages are shown open (the quote, and the second when close)."""
    verdict: str
    gap: float | None
    open: int

    def as_json(self) -> dict:
        return {"verdict": self.verdict, "gap": self.gap, "open": self.open,
                "close_gap": CLOSE_GAP, "low_score": LOW_SCORE}


def places(passages: list[dict]) -> Places:
    """One place or several, from the passages' scores (their JSON, the quote first)."""
    if not passages:
        return Places(NONE, None, 0)
    top = float(passages[0]["score"])
    gap = top - float(passages[1]["score"]) if len(passages) > 1 else None
    if gap is not None and gap < CLOSE_GAP:
        return Places(SEVERAL, gap, 2)
    if top < LOW_SCORE:
        return Places(WEAK, gap, min(2, len(passages)))
    return Places(ONE, gap, 1)


# -- the key line --------------------------------------------------------------------------------

_CODE_KINDS = {"option", "command", "file", "identifier", "code", "operator"}


def _norm(text: str) -> str:
    return " ".join((text or "").split())


def key_line_shown(key: dict | None, quote: dict | None) -> bool:
    """Whether the key line (its JSON) is shown (module docstring): a whole term of the quote's
    entry, with its page."""
    from engine.answer.checks.terms import find_terms, normalize
    from engine.answer.passages.units import is_code_line, is_command_line

    if not key or not quote or not key.get("page"):
        return False
    line, term = _norm(key["text"]), _norm(key.get("term"))
    words = line.split()
    # a letter-spaced line ("l i n e . ”") is debris of the PDF's text, not a term
    if len(term) < 2 or not words or sum(len(w) for w in words) < 2 * len(words):
        return False
    lines = [_norm(x) for x in quote["text"].splitlines() if x.strip()]
    if lines and line == lines[0] and is_command_line(line):
        return True  # the entry's signature
    if line in lines and (is_command_line(line) or is_code_line(line)) \
            and re.search(r"[A-Za-z]{2}", line):
        return True  # a line of code of the quote
    whole = {normalize(t.text) for t in find_terms(quote["text"]) if t.kind in _CODE_KINDS}
    return normalize(line) in whole  # one code term of the quote, alone on its line


def key_line_on_screen(out: dict) -> bool:
    """Whether the screen shows an answer's key line (``out``: the answer's JSON, its
    ``key_line_shown`` aside; module docstring): a whole term of the quote's entry, one clear
    place, and where the model answered, the answer shown and naming the line's term."""
    if not key_line_shown(out.get("key_line"), out.get("quote")):
        return False
    if places(out.get("passages") or []).verdict != ONE:
        return False
    if out.get("confidence") is None:  # nothing generated (quote mode): the quote is the answer
        return True
    return not out["folded"] and out["confidence"]["signals"].get("key_agree") == 1.0


# The places verdict in words (the CLI's line; the page's headline says the same,
# app/shared/lines.py).
PLACES_WORDS = {
    ONE: "one clear place in the manual: passage 1",
    SEVERAL: "more than one candidate place: passages 1 and 2 score alike, read both",
    WEAK: "no clear place: passage 1 scores low, read passages 1 and 2",
    NONE: "no passage of the manual matches",
}


def places_line(places_json: dict) -> str:
    """The places verdict (``Places.as_json()``) in words."""
    return PLACES_WORDS[places_json["verdict"]]
