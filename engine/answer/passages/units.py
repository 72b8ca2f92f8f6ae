"""Passages: the units a section's text is quoted and read by (sentences, lines, and a sentence
with the line(s) it introduces).

A node's text keeps the document's layout: paragraphs separated by a blank line, the PDF's
lines inside them. Manuals put commands, options and code on lines of their own, often one to
three words long, so a paragraph is read one of two ways:

- a **line block** (every line looks like code, a command, an option or a short label: a prompt
  such as ``>`` or ``$``, code punctuation, a leading ``-`` or ``\\``, or at most ``SHORT_WORDS``
  words without final punctuation): each line is a unit, however short;
- a **table** (every line holds " | ", as the builders write tables): each row is a unit,
  with the table's header line before it, so the quote shows the row under its header;
- **prose**: the lines joined and cut into sentences (``paragraph_pieces``: a cut after ``.``,
  ``!`` or ``?`` followed by a space and a capital, digit, bracket, quote or backslash; a
  paragraph whose pieces run over ``MAX_SENTENCE_CHARS`` is a listing or a table and is read
  line by line); a piece under ``MIN_WORDS`` words joins the sentence after it
  (``join_short_pieces``: a definition list's term stays with its description).

A prose paragraph whose last sentence **introduces** what follows (it ends in a colon, in "as
follows", "the command is", "as simple as", ... or without final punctuation) takes the line
block after it into its own unit, when that block is at most ``INTRO_LINES`` lines and
``INTRO_WORDS`` words: "It is as simple as" + ``opam install why3``. A longer block (a listing,
a syntax block, an option table) stays line by line. The unit's text keeps its line breaks.

A unit **leans** on the one before when it opens with a word that refers back (It, This, These,
They, Such, For example, ...): the quote brings the unit before it along (``engine.answer.passages.quote``).

``split_sentences`` is the plain sentence split the evidence lines use (the same paragraph rule;
pieces under ``MIN_WORDS`` words and contents-style lines with dot leaders dropped).

Hand-written: no library splits manual text this way (sentence splitters drop the short lines,
code-block detectors expect Markdown fences, which PDF text lacks).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

TABLE_SEPARATOR = " | "
SHORT_WORDS = 6  # a line this short without final punctuation is a line, not prose
INTRO_LINES = 3
INTRO_WORDS = 40
MAX_SENTENCE_CHARS = 300  # a paragraph with a longer piece is a listing or a table
MIN_WORDS = 4  # a shorter sentence is no unit (a line of code or a label still is)

_PARA = re.compile(r"\n\s*\n")
_SENT_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[`\\A-Z0-9])")
_FENCE = re.compile(r"^\s*(```|~~~)\s*[\w+-]*\s*$")  # a Markdown code fence line (not a unit)
_LEADER = re.compile(r"(?:\.\s){3,}")  # contents lines and change logs
_PROMPT = re.compile(r"^(?:[>$%#]\s|>>>|\\|--?\w|\*\s*$|[{}])")
_CODE = re.compile(r"[(){}\[\]=_;<>`|]|::|\w/\w|\w\.\w+\(")
_FINAL = re.compile(r"[.!?:]['\")]?$")
_INTRO = re.compile(r"(?::|\bas follows|\bthe command is|\bas simple as)[.:]?$", re.I)
_LEANS = re.compile(r"^(?:It|Its|This|These|That|Those|They|Their|Them|Such|Here|Both|"
                    r"For example|For instance|In this case|In that case|The latter|The former|"
                    r"Otherwise|Alternatively|However|Then|Thus|Therefore|Also)\b")


@dataclass
class Unit:
    """One quotable unit of a section, verbatim (whitespace inside a line collapsed)."""

    text: str  # a sentence, a line, an introducing sentence + "\n" + its lines, or a table's
    # header + "\n" + one of its rows
    kind: str  # "sentence" | "line" | "intro" | "row"
    leans: bool  # refers to the unit before it (module docstring)


def paragraph_pieces(lines: list[str]) -> tuple[list[str], bool]:
    """A paragraph's lines as sentences: (pieces, False); or, when a piece runs over
    ``MAX_SENTENCE_CHARS`` in a paragraph of several lines (a listing or a table), (its lines,
    True)."""
    pieces = _SENT_END.split(" ".join(lines))
    if len(lines) > 1 and any(len(p) > MAX_SENTENCE_CHARS for p in pieces):
        return lines, True
    return pieces, False


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (module docstring), whitespace collapsed."""
    out = []
    for para in _PARA.split(text or ""):
        lines = [ln.strip() for ln in para.splitlines() if ln.strip()]
        if lines:
            out.extend(paragraph_pieces(lines)[0])
    return [" ".join(s.split()) for s in out
            if len(s.split()) >= MIN_WORDS and not _LEADER.search(s)]


def join_short_pieces(pieces: list[str]) -> list[str]:
    """A prose piece under ``MIN_WORDS`` words joins the sentence after it (the last one, the
    sentence before): a definition list's term ("autostart. Causes the sound to start ...",
    "Default: 10.") stays with what it names instead of being dropped as a fragment."""
    out: list[str] = []
    carry = ""
    for piece in pieces:
        piece = f"{carry} {piece}" if carry else piece
        carry = ""
        if len(piece.split()) < MIN_WORDS:
            carry = piece
        else:
            out.append(piece)
    if carry:
        if out:
            out[-1] = f"{out[-1]} {carry}"
        else:
            out.append(carry)
    return out


def is_code_line(line: str) -> bool:
    """A line that reads as a command, code, an option or a label rather than prose."""
    words = line.split()
    if not words:
        return False
    if _PROMPT.match(line):
        return True
    if _CODE.search(line) and len(words) <= 12:
        return True
    return len(words) <= SHORT_WORDS and not _FINAL.search(line)


def is_table(lines: list[str]) -> bool:
    """A table as the builders write one (one row a line, cells separated by " | "; the
    first line its header): at least two lines, every one with a separator."""
    return len(lines) >= 2 and all(TABLE_SEPARATOR in ln for ln in lines)


def is_command_line(line: str) -> bool:
    """A line with a prompt or code punctuation (``$ make``, ``\\pause``, ``f(x)``): a command,
    however short."""
    return bool(_PROMPT.match(line) or _CODE.search(line))


def introduces(sentence: str) -> bool:
    """Whether a sentence ends the way a sentence introducing a line does (module docstring)."""
    s = sentence.rstrip()
    return bool(_INTRO.search(s)) or not re.search(r"[.!?;,)\"'\u201d]$", s)  # or unfinished


def leans(text: str) -> bool:
    """Opens with a word that refers back, or in lower case (the sentence a code line cut)."""
    return bool(_LEANS.match(text)) or text[:1].islower()


def _keep(text: str, kind: str) -> bool:
    if _LEADER.search(text) or not re.search(r"[A-Za-z]", text):
        return False
    return kind != "sentence" or len(text.split()) >= MIN_WORDS


def split_units(body: str, title: str = "") -> list[Unit]:
    """The units of a section's text in document order (module docstring); a unit that repeats
    the section's ``title`` (its heading, which the node text opens with) is left out."""
    items: list[tuple[int, str, str]] = []  # (paragraph, kind "sentence" | "line" | "row", text)
    for para in _PARA.split(body or ""):
        lines = [" ".join(ln.split()) for ln in para.splitlines()
                 if ln.strip() and not _FENCE.match(ln)]
        if not lines:
            continue
        p = len({i[0] for i in items})
        if is_table(lines):  # a row with its table's header: quoted and read together
            items += [(p, "row", f"{lines[0]}\n{row}") for row in lines[1:]]
            continue
        pieces, listing = paragraph_pieces(lines)
        if listing or all(is_code_line(ln) for ln in lines):
            items += [(p, "line", ln) for ln in lines]  # code, or a listing or a table
        else:
            items += [(p, "sentence", x) for x in join_short_pieces(pieces)]
    head = _title_key(title)
    units: list[Unit] = []
    i = 0
    while i < len(items):
        p, kind, text = items[i]
        run = _introduced(items, i)
        if run:
            units.append(Unit(text + "\n" + "\n".join(items[j][2] for j in run), "intro",
                              leans(text)))
            i = run[-1] + 1
            continue
        if not (head and _title_key(text).endswith(head)):
            units.append(Unit(text, kind, kind == "sentence" and leans(text)))
        i += 1
    return [u for u in units if _keep(u.text, u.kind)]


def _introduced(items: list[tuple[int, str, str]], i: int) -> list[int]:
    """Indices of the lines that item ``i`` introduces (module docstring); [] when none: the
    item must read as words, not code, and end as an introduction; the lines are the rest of
    its own paragraph (a line) or the next paragraph (a paragraph's last item), all lines, at
    most ``INTRO_LINES`` and ``INTRO_WORDS``."""
    p, kind, text = items[i]
    if kind == "line" and (_PROMPT.match(text) or _CODE.search(text)):
        return []
    if not introduces(text) or i + 1 >= len(items):
        return []
    target = items[i + 1][0]
    run = [j for j in range(i + 1, len(items)) if items[j][0] == target]
    if (not run or any(items[j][1] != "line" for j in run) or len(run) > INTRO_LINES
            or sum(len(items[j][2].split()) for j in run) > INTRO_WORDS):
        return []
    return run


def _title_key(text: str) -> str:
    """A heading line's words without its number ("5.1.1 Installation via Opam" -> "installation via opam")."""
    return " ".join(re.sub(r"^[\d.\s]+", "", text).lower().split())
