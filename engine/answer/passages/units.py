"""Passages: the units a section's text is quoted and read by (sentences, lines, a sentence
with the line(s) it introduces, a signature with its description's first sentence), and the
manual's entries they belong to.

A node's text keeps the document's layout: paragraphs separated by a blank line, the PDF's
lines inside them. Manuals put commands, options and code on lines of their own, often one to
three words long, so a paragraph is read one of two ways:

- a **line block** (every line looks like code, a command, an option or a short label: a prompt
  such as ``>`` or ``$``, code punctuation, a leading ``-`` or ``\\``, or at most ``SHORT_WORDS``
  words without final punctuation): each line is a unit, however short;
- a **table** (every line holds " | ", as the builders write tables): each row is a unit,
  with the table's header line before it, so the quote shows the row under its header;
- **prose**: the lines joined and cut into sentences (``sentence_pieces``: a cut after ``.``,
  ``!`` or ``?`` followed by a space and a capital, digit, bracket, quote or backslash, except
  after an abbreviation that does not end a sentence, "e.g.", "i.e.", "cf.", "vs.", ..., or
  one before a number, "see p. 12", "pp. 3-4", "Fig. 3", "Sec. 2.1"; a paragraph whose pieces
  run over ``MAX_SENTENCE_CHARS`` is a listing or a table and is read line by line); a piece
  under ``MIN_WORDS`` words joins the sentence after it (``join_short_pieces``: a definition
  list's term stays with its description).

**Entries**: a reference manual is made of entries, and a unit knows the first unit of its
entry (``Unit.head``) and the entry's name (``Unit.entry``), so the quote can start there:

- a **definition entry**: a paragraph that opens with at most ``SIGNATURE_LINES`` signature
  lines (code-like, the first a command line: ``\\patchcmd[<prefix>]{<command>}...``,
  ``bol = <commands> (no default)``, an HTML ``<dt>``) and goes on in prose (the PDF builder
  and the HTML builder put a description on the lines under its signature,
  ``engine.document.builders``): the signature with the description's first sentence is one
  unit (kind "entry"), the description's other sentences are units of that entry;
- a bulleted or numbered **list item** (``list_items``: a line that opens with a marker); the
  items of a numbered list (1., 2., 3., ...) are one entry, a **step list**;
- a **FAQ question** (a short paragraph ending in "?") with the paragraph that answers it.

Inside a plain paragraph sentences stay the unit: each is its own entry.

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

# Abbreviations that end with a dot yet not a sentence (a cut after them is undone); those that
# point to a number ("Fig. 3", "see p. 12", "pp. 3-4", "Sec. 2.1": undone before a digit or a
# bracket); and those that may end one ("etc.": a cut before a capitalised word stays).
NO_END_ABBREVIATIONS = frozenset(
    "e.g. i.e. cf. vs. viz. resp. approx. ca. incl. esp. a.k.a. w.r.t. n.b. mr. mrs. ms. dr. "
    "prof. al.".split())
NUMBER_ABBREVIATIONS = frozenset(
    "p. pp. fig. figs. sec. secs. sect. ch. chap. eq. eqs. tab. no. nos. vol. ref. refs. app. "
    "appx. ex. art. ll.".split())
END_ABBREVIATIONS = frozenset({"etc."})
_INITIALS = re.compile(r"(?:[a-z]\.){2,}")  # "u.s.", "a.m."
# a cross-reference's word before its number: "see Section 2. 1" is no sentence end
_REFERENCE = re.compile(r"\b(?:Section|Chapter|Table|Figure|Appendix|Part|page|pages)\s*$")
SIGNATURE_LINES = 3  # a definition entry's signature: at most this many lines
_PARA = re.compile(r"\n\s*\n")
_STARTS_SENTENCE = re.compile(r"[A-Z\u27e8(\\\[\"'`]")
# a bulleted or numbered item's first line ("• autostart. Causes ...", "2. Run make.", "(a) ...")
_MARKER = re.compile(r"^(?:[\u2022\u25e6\u25aa\u2023\u2013\u2014*\u00b7-]\s|\d{1,2}[.)]\s|\(?[a-z]\)\s)")
_SHELL = re.compile(r"^(?:[>$%#]\s|>>>)")
_NUMBER = re.compile(r"^(\d{1,2})[.)]\s")
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
    kind: str  # "sentence" | "line" | "intro" | "row" | "entry" (a signature and the first
    # sentence of its description)
    leans: bool  # refers to the unit before it (module docstring)
    head: int = 0  # index of its entry's first unit (its own when it starts one or has none)
    entry: str = ""  # its entry's name: the signature's first line ("" when none)
    para: int = 0  # its paragraph among the section's (0: the first)


def sentence_pieces(text: str) -> list[str]:
    """``text`` cut into sentences (module docstring): a cut after an abbreviation that does not
    end a sentence ("e.g.", "i.e.", "cf.", "vs.", "Fig.", "Sec.", "resp.", "approx.", a page
    reference "p." / "pp.", ...) is undone, and so is one after "etc." when what follows is no
    capitalised word; a number after "Section", "Chapter", "Table", ... ("see Section 2. 1")
    is never cut either."""
    out: list[str] = []
    for piece in _SENT_END.split(text):
        if out and _holds_on(out[-1], piece):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out


def _holds_on(before: str, after: str) -> bool:
    """Whether a cut between ``before`` and ``after`` falls inside one sentence."""
    last = before.rsplit(None, 1)[-1] if before.split() else ""
    word = last.lstrip("([\"'").lower()
    if word in NO_END_ABBREVIATIONS or _INITIALS.fullmatch(word):
        return True
    if word in NUMBER_ABBREVIATIONS:
        first = after.split()[0] if after.split() else ""
        return after[:1] in "([" or any(c.isdigit() for c in first)
    if word in END_ABBREVIATIONS:  # "etc." ends a sentence before a capitalised word
        return not after[:1].isupper()
    return bool(_REFERENCE.search(before) and after[:1].isdigit())


def paragraph_pieces(lines: list[str]) -> tuple[list[str], bool]:
    """A paragraph's lines as sentences: (pieces, False); or, when a piece runs over
    ``MAX_SENTENCE_CHARS`` in a paragraph of several lines (a listing or a table), (its lines,
    True)."""
    pieces = sentence_pieces(" ".join(lines))
    if len(lines) > 1 and any(len(p) > MAX_SENTENCE_CHARS for p in pieces):
        return lines, True
    return pieces, False


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (module docstring), whitespace collapsed."""
    out = []
    for para in _PARA.split(text or ""):
        lines = [ln.strip() for ln in para.splitlines() if ln.strip()]
        sig = signature_lines(lines) if lines else 0
        if sig:  # a definition entry: its signature lines, then its description's sentences
            out.extend(lines[:sig])
            lines = lines[sig:]
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


def signature_lines(lines: list[str]) -> int:
    """How many of a paragraph's first lines are a definition entry's signature (0: none): at
    most ``SIGNATURE_LINES`` lines that read as code, a command or a short label, the first
    one a command line (``is_command_line``: a run-in heading in words is no signature),
    followed by prose that starts a sentence (a capital, a
    bracket or a backslash: "\\patchcmd[...]{...}" then "This command extracts ...",
    "bol = <commands> (no default)" then "Used to set ...", a ``<dt>`` then its ``<dd>``)."""
    k = 0
    while k < min(SIGNATURE_LINES, len(lines) - 1) and is_code_line(lines[k]):
        k += 1
    if k == 0 or k == len(lines) or not is_command_line(lines[0]) or _SHELL.match(lines[0]):
        return 0  # a prompt's line ("> help(solve)", "$ make") is an example, not a signature
    rest = lines[k:]
    if all(is_code_line(ln) for ln in rest) or not _STARTS_SENTENCE.match(rest[0]):
        return 0
    return k


def list_items(lines: list[str]) -> list[list[str]]:
    """A paragraph's lines cut where a bulleted or numbered item starts (``_MARKER``); one
    part when the paragraph is no list."""
    starts = [i for i, ln in enumerate(lines) if _MARKER.match(ln)]
    if not starts or (starts[0] != 0 and len(starts) < 2):
        return [lines]
    cuts = sorted({0, *starts})
    return [lines[a:b] for a, b in zip(cuts, cuts[1:] + [len(lines)])]


def split_units(body: str, title: str = "") -> list[Unit]:
    """The units of a section's text in document order (module docstring); a unit that repeats
    the section's ``title`` (its heading, which the node text opens with) is left out. Each
    unit's ``head`` is the index of its entry's first unit (its own when it opens one or
    belongs to none) and ``entry`` that entry's name (a signature's first line, or "")."""
    # (paragraph, kind "sentence" | "line" | "row" | "entry", text, entry group or -1)
    items: list[tuple[int, str, str, int]] = []
    groups: dict[int, str] = {}  # entry group -> its name
    carry = -1  # a FAQ question's group: its answer (the next paragraph) joins it
    step = (-1, 0)  # the group of a numbered step list and its last number
    for p, para in enumerate(_PARA.split(body or "")):
        lines = [" ".join(ln.split()) for ln in para.splitlines()
                 if ln.strip() and not _FENCE.match(ln)]
        if not lines:
            continue
        if is_table(lines):  # a row with its table's header: quoted and read together
            items += [(p, "row", f"{lines[0]}\n{row}", -1) for row in lines[1:]]
            carry = -1
            continue
        for part in list_items(lines):
            group, carry = carry, -1
            number = _NUMBER.match(part[0])
            if number and step[0] >= 0 and int(number.group(1)) == step[1] + 1:
                group = step[0]  # the next step of a numbered list: the same entry
            elif group < 0 and (_MARKER.match(part[0]) or signature_lines(part)):
                group = len(groups)  # a list item or a definition entry opens an entry
                groups[group] = ""
            step = (group, int(number.group(1))) if number else (-1, 0)
            items += _part_items(p, part, group, groups)
        last = items[-1] if items else None
        if (last is not None and last[0] == p and last[1] == "sentence"
                and last[2].endswith("?") and len(lines) <= 3):
            if last[3] < 0:  # a FAQ question: the answer after it is one entry with it
                groups[len(groups)] = ""
                items[-1] = (*last[:3], len(groups) - 1)
            carry = items[-1][3]
    head = _title_key(title)
    built: list[tuple[Unit, int]] = []
    paras = {p: k for k, p in enumerate(dict.fromkeys(it[0] for it in items))}
    i = 0
    while i < len(items):
        p, kind, text, group = items[i]
        run = _introduced(items, i)
        if run:
            built.append((Unit(text + "\n" + "\n".join(items[j][2] for j in run), "intro",
                               leans(text), para=paras[p]), group))
            i = run[-1] + 1
            continue
        if not (head and _title_key(text).endswith(head)):
            built.append((Unit(text, kind, kind == "sentence" and leans(text), para=paras[p]),
                          group))
        i += 1
    units: list[Unit] = []
    first: dict[int, int] = {}
    for u, group in built:
        if not _keep(u.text, u.kind):
            continue
        u.head = first.setdefault(group, len(units)) if group >= 0 else len(units)
        u.entry = groups.get(group, "")
        units.append(u)
    return units


def _part_items(p: int, lines: list[str], group: int,
                groups: dict[int, str]) -> list[tuple[int, str, str, int]]:
    """The items of one paragraph (or list item): a table's rows are handled by the caller;
    a definition entry (``signature_lines``) gives its signature with the description's first
    sentence as one "entry" item, then the description's other sentences; code lines or a
    listing give lines; prose gives sentences."""
    sig = signature_lines(lines)
    if sig:
        groups[group] = lines[0]
        pieces, listing = paragraph_pieces(lines[sig:])
        if not listing:
            pieces = join_short_pieces(pieces)
            signature = "\n".join(lines[:sig])
            return ([(p, "entry", f"{signature}\n{pieces[0]}", group)]
                    + [(p, "line" if listing else "sentence", x, group) for x in pieces[1:]])
    pieces, listing = paragraph_pieces(lines)
    if listing or all(is_code_line(ln) for ln in lines):
        return [(p, "line", ln, group) for ln in lines]  # code, or a listing or a table
    return [(p, "sentence", x, group) for x in join_short_pieces(pieces)]


def _introduced(items: list[tuple[int, str, str, int]], i: int) -> list[int]:
    """Indices of the lines that item ``i`` introduces (module docstring); [] when none: the
    item must read as words, not code, and end as an introduction; the lines are the rest of
    its own paragraph (a line) or the next paragraph (a paragraph's last item), all lines, at
    most ``INTRO_LINES`` and ``INTRO_WORDS``."""
    p, kind, text, _ = items[i]
    if kind == "entry" or (kind == "line" and (_PROMPT.match(text) or _CODE.search(text))):
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
