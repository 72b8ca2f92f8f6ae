"""The answer's form: what makes a generated text no answer, whatever the answer check's score.

``read_form`` reads one finished answer (after the loop clean-up) and returns it as shown, with
the fault that folds it and the one line that says why:

- leak: the model wrote a line of its prompt ("Question: ...", "Context: ...", a passage's
  header "[3] How to use etoolbox (p. 41):"), usually a question of its own after its answer.
  The answer is cut before that line and the cut is said (``Form.note``); only when nothing but
  opening words is left is it folded. A leading "Answer:" label is dropped.
- preamble: nothing follows the opening words ("The answer is:", "To do this, use:", a lone
  "1."). A list mark left dangling at the end is dropped first; opening words after whole
  sentences ("... \\appto. Here's an example:") are dropped back to them, and that is said.
- cut: generation stopped inside code, or mid-sentence: at its token or time limit, without a
  sentence's end; at the repetition stop (whether or not the loop clean-up cut the answer
  back), ending in a word or a comma. It ends in a name or a sentence cut short
  (``The `\\patchcmd``). The unfinished end is dropped back to the last whole sentence, and
  the cut is said; only when no whole sentence is left is it folded. An end that names what
  the passages do not hold (an invented code example) is kept, for the answer check to fold.
- repeat: one sentence of four or more words is said twice.

A name the passages do not hold is the answer check's own rule (``engine.answer.checks.check``),
which folds whatever the score as well.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

# A prompt's labels as the prompts write them (engine.answer.generation.prompts), at the start
# of a line or after a sentence's end.
_LABELS = r"(?:Question|Answer|Context|Manual sections?)"
# A passage's header as the text prompt gives it (engine.answer.passages.sections): "[3] How to
# use etoolbox (p. 41):" alone on its line, a list mark before it or not.
_HEADER = r"[ \t]*(?:\d{1,2}[.)][ \t]*)?\[\d{1,2}\][ \t]+[^\n]*:[ \t]*$"
LEAK = re.compile(rf"(?:^|(?<=[.!?])[ \t]+)[ \t>*#_]*{_LABELS}[ \t]*[*_]*:|^{_HEADER}", re.M)
_LEAD_ANSWER = re.compile(r"^[ \t*#_]*Answer[ \t]*[*_]*:[ \t*_]*", re.I)
_DANGLING_MARK = re.compile(r"(?:^|\n|\s)(?:\d{1,2}[.)]|[-*•])[ \t]*$")
_ENDED = re.compile(r"""(?:[.!?;]|```)[\s"'”’*_`)\]]*$""")  # a sentence's or a fence's end
_UNENDED = re.compile(r"[\w,(\-–—]$")  # a word or a joining mark: the sentence goes on
_FENCE = re.compile(r"^[ \t]*```", re.M)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
# a sentence's end, not an abbreviation's ("p. 15", "e.g.")
_STOP = re.compile(r"(?<!\bp)(?<!\bpp)(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)(?<!\bcf)"
                   r"[.!?](?=\s|$)")
_WORD = re.compile(r"[\w\\]+")
REPEAT_WORDS = 4  # a sentence said twice counts from this many words
_LIMIT = {"length": "at its {n}-token limit", "time": "at its time limit",
          "loop": "where it began to repeat itself", "repeat": "where it began to repeat itself"}


@dataclass(frozen=True)
class Form:
    """An answer as shown (``text``), the fault that folds it (None: none), the line said above
    it when folded, and ``note``: a line saying what was trimmed off a shown answer."""

    text: str
    fault: str | None = None
    line: str | None = None
    note: str | None = None
    trimmed_off: str | None = None  # what was cut off a shown answer: "leak", "cut", "preamble"

    @property
    def trimmed(self) -> bool:
        return self.trimmed_off is not None

    def as_json(self) -> dict:
        return {"fault": self.fault, "line": self.line, "note": self.note,
                "trimmed": self.trimmed_off}


def _quoted(text: str, most: int = 60) -> str:
    """``text`` on one line, at most ``most`` characters, for a line that quotes it."""
    flat = " ".join(text.split())
    return flat if len(flat) <= most else flat[:most - 1].rstrip() + "…"


def trim_leak(text: str) -> tuple[str, str | None]:
    """(``text`` without a leading "Answer:" label and cut before its first leaked prompt line,
    the leaked line as written or None when there is none)."""
    text = _LEAD_ANSWER.sub("", text, count=1)
    m = LEAK.search(text)
    if m is None:
        return text, None
    line = text[m.start():].strip().split("\n", 1)[0]
    return text[:m.start()].rstrip(), line


def _open_code(text: str) -> bool:
    """Whether ``text`` ends inside code: an unclosed fence or an unclosed backtick span."""
    if len(_FENCE.findall(text)) % 2:
        return True
    rest = re.sub(r"```.*?```", " ", text, flags=re.S)
    return rest.count("`") % 2 == 1


def _open_bracket(text: str) -> bool:
    """Whether ``text`` ends inside parentheses or brackets ("(p. 15" goes on)."""
    return text.count("(") > text.count(")") or text.count("[") > text.count("]")


def repeated_sentence(text: str) -> str | None:
    """The first sentence of four or more words that ``text`` says twice (case and punctuation
    aside), as written; None when none is."""
    seen = set()
    for m in _SENTENCE.finditer(text):
        words = tuple(w.lower() for w in _WORD.findall(m.group()))
        if len(words) < REPEAT_WORDS:
            continue
        if words in seen:
            return m.group().strip()
        seen.add(words)
    return None


def whole_sentences(text: str) -> str:
    """``text`` up to its last sentence's end (``.``, ``!`` or ``?`` before a space, not an
    abbreviation's) outside code and brackets; "" when none."""
    ends = [m.end() for m in _STOP.finditer(text)
            if not _open_code(text[:m.end()]) and not _open_bracket(text[:m.end()])]
    return text[:ends[-1]].rstrip() if ends else ""


def _cut_short(text: str, stop: str) -> bool:
    """Whether ``text``, stopped by ``stop``, ends inside code or mid-sentence (module
    docstring): a limit stops anywhere; the loop clean-up cuts back to a sentence's end or a
    line break, so there only a word or a comma at the end counts."""
    if _open_code(text):
        return True
    return not _ENDED.search(text) if stop in ("length", "time") else bool(_UNENDED.search(text))


def _preamble(bare: str) -> bool:
    """Opening words alone: nothing, or a text that ends in a colon (list marks dropped)."""
    return not bare or bare.rstrip("*_ ").endswith(":")


def read_form(text: str, stop: str | None = None, generated: int | None = None,
              holds: Callable[[str], bool] | None = None) -> Form:
    """The answer ``text`` as shown and its fault (module docstring). ``stop``: why generation
    ended (``GenerationResult.stop``; "eos" when the model ended it); ``generated``: its tokens;
    ``holds(part)``: whether the passages hold every name of ``part`` (None: not asked)."""
    text = (text or "").strip()
    kept, leaked = trim_leak(text)
    note, off = None, None
    bare = _DANGLING_MARK.sub("", kept).rstrip()
    if leaked is not None:
        if _preamble(bare):  # nothing of its own before the prompt's line
            return Form(text, "leak", "The model's answer gives nothing before a line copied "
                        f"from its own prompt (“{_quoted(leaked)}”).")
        note, off = (f"A line the model added after its answer (“{_quoted(leaked)}”) was cut: "
                     "it repeats the prompt's form, not the manual."), "leak"
    elif stop in _LIMIT and _cut_short(kept, stop):
        where = _LIMIT[stop].format(n=generated if generated is not None else "token")
        head = whole_sentences(kept)
        if head and holds is not None and not holds(kept[len(head):]):
            pass  # the end invents a name: kept whole, for the check to flag it there
        elif head:
            note, off = (f"The model's answer was cut off {where}; its unfinished end "
                         f"(“{_quoted(kept[len(head):].strip())}”) was dropped."), "cut"
            kept = head
            bare = _DANGLING_MARK.sub("", kept).rstrip()
        elif not _preamble(bare):  # opening words alone are said as such below
            inside = " inside code" if _open_code(kept) else ""
            return Form(kept, "cut", f"The model's answer was cut off{inside} {where}, before "
                        "its first sentence ended.")
    if _preamble(bare) and off is None and whole_sentences(bare):  # content, then opening words
        head = whole_sentences(bare)
        note, off = (f"The model's answer ended in opening words with nothing after them "
                     f"(“{_quoted(bare[len(head):].strip())}”); they were dropped."), "preamble"
        kept = bare = head
    if _preamble(bare):
        opening = _quoted((bare or kept or text).rsplit("\n", 1)[-1]) or "nothing"
        return Form(kept, "preamble", f"The model's answer gives nothing after its opening "
                    f"words (“{opening}”).", note, off)
    again = repeated_sentence(kept)
    if again is not None:
        return Form(kept, "repeat", f"The model's answer says the same sentence twice "
                    f"(“{_quoted(again)}”).", note, off)
    return Form(kept, None, None, note, off)
