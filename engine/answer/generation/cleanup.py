"""Clean-up of a finished answer: a check that labels it degenerate (a loop, markup debris,
nothing) so it is never shown as an answer without a warning, and the cut of a loop at its end
(``clean_answer``). The stop rules that end a loop while decoding: ``engine.serving.stops``."""
from __future__ import annotations

import re

from engine.serving.stops import REPEAT_N, REPEAT_TIMES

_TAG = re.compile(r"</?[A-Za-z][\w:-]*\s*/?>")
_WORD = re.compile(r"[^\W\d_]{2,}")
_RUN = re.compile(r"(\S.+?)\1{3,}")  # a unit repeated four times in a row
_TAIL = re.compile(r"(\S.*?\s)\1+$")  # the text ends in a unit said twice or more


def max_ngram_repeats(words: list[str], n: int = REPEAT_N) -> int:
    """The highest count of any word n-gram."""
    counts: dict[tuple, int] = {}
    for i in range(len(words) - n + 1):
        key = tuple(words[i:i + n])
        counts[key] = counts.get(key, 0) + 1
    return max(counts.values(), default=0)


def _words(text: str) -> list[str]:
    """Lower-case words without punctuation; list numbers ("2.") left out."""
    out = [re.sub(r"[^\w\\]", "", w.lower()) for w in text.split()]
    return [w for w in out if w and not w.isdigit()]


_SENTENCE_END = re.compile(r"[.!?:;](?=\s)|\n")
_LIST_MARK = re.compile(r"(?:^|\s)(?:\d{1,2}[.)]|[-*•])\s*$")


def trim_loop(text: str, n: int = REPEAT_N) -> str | None:
    """The text up to where it began to repeat itself, or None when no word n-gram repeats.

    The cut is at the second occurrence of the earliest-repeated word ``n``-gram (or, for a
    shorter unit said again and again, ``-header -header -header``, after its first time), then back to
    the last sentence end (a period, colon, closing bracket or line break) before it when there
    is one, without a dangling list mark ("2."). Used on a text answer judged "repeat" by
    ``degeneracy``: what came before the loop is the answer; the loop adds nothing.
    """
    spans = [(m.start(), w) for m in re.finditer(r"\S+", text)
             if (w := re.sub(r"[^\w\\]", "", m.group().lower())) and not w.isdigit()]
    seen: dict[tuple, int] = {}
    cut = None
    for i in range(len(spans) - n + 1):
        key = tuple(w for _, w in spans[i:i + n])
        if key in seen:
            cut = spans[i][0]
            break
        seen[key] = i
    if cut is None:  # a loop of fewer than n words: a unit said over and over, cut after its
        # first time (found on the text with its white space made single spaces)
        flat = " ".join(text.split()) + " "
        m = _RUN.search(flat) or _TAIL.search(flat)
        if m is None:
            return None
        keep = len(flat[:m.start(1) + len(m.group(1))].replace(" ", ""))
        pos = len(text)
        for i, ch in enumerate(text):  # the same number of non-space characters in text
            keep -= not ch.isspace()
            if keep < 0:
                pos = i
                break
        return text[:pos].rstrip()
    return to_sentence_end(text[:cut])


def to_sentence_end(text: str) -> str:
    """``text`` back to its last sentence end (``.``, ``!``, ``?``, ``:`` or ``;`` before a
    space, or a line break) when it has one, without a dangling list mark ("2.")."""
    head = text.rstrip()
    ends = [m.end() for m in _SENTENCE_END.finditer(head + "\n")]
    ends = [e for e in ends if e <= len(head) and head[:e].strip()]
    if ends:
        head = head[:ends[-1]].rstrip()
    return _LIST_MARK.sub("", head).rstrip()


def degeneracy(text: str, stop: str | None = None) -> str | None:
    """Why ``text`` is not an answer ("empty", "repeat", "markup"), or None when it reads as one.

    ``stop``: why decoding ended (``GenerationResult.stop``). The decoding stop ends a loop, but
    an answer that names ``\\patchcmd`` three times is still an answer, so the words decide:
    - repeat: some word 4-gram occurs three times or more; or fewer than 60% of the word
      4-grams are distinct; or a unit of two or more characters with a letter or digit comes
      four times in a row (``pin-pin-pin-pin-``); or the 4-token stop fired and a stretch of
      six words came twice or the text ends in a unit said twice in a row (a loop stopped in
      its third round); or a loop was cut off and fewer than five words remain;
    - markup: three or more tags (``<defs>``) that make up a fifth of the characters, or fewer
      than 40% of the non-space characters belong to words (debris such as ``}}}} \\\\ ]]``).
    """
    t = (text or "").strip()
    if not t:
        return "empty"
    words = _words(t)
    grams = [tuple(words[i:i + REPEAT_N]) for i in range(len(words) - REPEAT_N + 1)]
    if grams and (max_ngram_repeats(words) >= REPEAT_TIMES or len(set(grams)) < 0.6 * len(grams)):
        return "repeat"
    if any(re.search(r"[A-Za-z0-9]", m.group(1)) for m in _RUN.finditer(t)):
        return "repeat"
    if stop == "repeat" and (max_ngram_repeats(words, 6) >= 2
                             or _TAIL.search(" ".join(t.split()) + " ")):
        return "repeat"
    if stop == "loop" and len(words) < 5:
        return "repeat"
    tags = _TAG.findall(t)
    dense = len(t.replace(" ", ""))
    if len(tags) >= 3 and sum(map(len, tags)) >= 0.2 * dense:
        return "markup"
    if dense >= 24 and sum(map(len, _WORD.findall(t))) < 0.4 * dense:
        return "markup"
    return None


def clean_answer(text: str, stop: str | None = None) -> tuple[str, str | None, bool]:
    """A generated text answer as shown: (text, degeneracy reason or None, repetition cut).
    An answer judged "repeat" whose start before the loop (``trim_loop``) reads as an answer
    is cut there; one whose loop the decoding stop already cut off (``stop == "loop"``) ends at
    its last full sentence; else it keeps its text and its reason."""
    reason = degeneracy(text, stop)
    if reason == "repeat":
        kept = trim_loop(text)
        if kept and degeneracy(kept) is None:
            return kept, None, True
    if reason is None and stop == "loop":  # the stop cut the loop off, maybe mid-sentence
        kept = to_sentence_end(text)
        if kept != text and len(_words(kept)) >= 5 and degeneracy(kept) is None:
            return kept, None, True
    return text, reason, False
