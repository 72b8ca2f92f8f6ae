"""Copy-constrained decoding: the reader may write only a span of its passages (issue 55).

For a question that asks for a name (``answer_type.NAME_TYPES``) the answer can be required to
be a contiguous run of the passages' own tokens: at each step the reader chooses (greedily, as
always) among the tokens that continue what it has written as some span of the passages, and
ends with its end-of-sequence token, which is allowed once it has written a token and is the
only choice when its span reaches the end of a line or ``SPAN_CAP`` tokens (a span never starts
or ends inside a character that the tokenizer split into byte tokens).

transformers' ``PrefixConstrainedLogitsProcessor`` applies the mask; the span rule it is given
(``SpanIndex.allowed``) is written here: the library's constraints (``force_words_ids``,
``PhrasalConstraint``, ``DisjunctiveConstraint``) force given phrases to appear, under beam
search only, and none of them limits the output to substrings of a text.
"""
from __future__ import annotations

from collections import defaultdict

import torch
from transformers import PrefixConstrainedLogitsProcessor

SPAN_CAP = 32  # the longest span, in tokens (a signature with its arguments fits)
CHAR_TOKENS = 4  # a character is at most four bytes: a span may pass the cap to finish one
PART = "\ufffd"  # what the tokenizer decodes a part of a character to


class SpanIndex:
    """The token ids of a source text and the spans of it a generation may write. ``breaks``:
    the ids a span may not hold (line breaks: a span stays on one line of the passages);
    ``ends``: the end-of-sequence ids."""

    def __init__(self, source: list[int], ends: frozenset[int], breaks: frozenset[int],
                 cap: int = SPAN_CAP, decode=None):
        if not ends:
            raise ValueError("copy-constrained decoding needs an end-of-sequence id")
        self.source, self.ends, self.breaks, self.cap = list(source), ends, breaks, cap
        # ``decode(ids)``: the tokenizer's; a byte-level token may hold part of a character
        # ("⟨" is three byte tokens), and a span neither starts nor ends inside one
        self.decode = decode
        self.starts: dict[int, list[int]] = defaultdict(list)  # token -> its positions
        self.first: set[int] = set()  # the tokens a span may start with
        for i, t in enumerate(self.source):
            if t not in breaks:
                self.starts[t].append(i)
                if not self._split(self.source[i:i + CHAR_TOKENS], at_start=True):
                    self.first.add(t)

    def _split(self, ids: list[int], at_start: bool = False) -> bool:
        """Whether ``ids`` start (or end) inside a character."""
        if self.decode is None:
            return False
        text = self.decode(ids)
        return text.startswith(PART) if at_start else text.endswith(PART)

    def allowed(self, batch_id: int, generated: torch.Tensor) -> list[int]:
        """The ids that may follow ``generated`` (this row's generated ids): the next token of
        each place in the source where ``generated`` stands, or an end; any start of a span
        when nothing is generated yet."""
        written = [int(t) for t in generated]
        if not written:
            return sorted(self.first) or sorted(self.ends)
        n = len(written)
        whole = not self._split(written)  # it may end here
        if n >= self.cap and whole:
            return sorted(self.ends)
        nxt = {self.source[i + n] for i in self.starts.get(written[0], ())
               if i + n < len(self.source) and self.source[i:i + n] == written} - self.breaks
        return sorted(nxt | self.ends) if whole or not nxt else sorted(nxt)

    def holds(self, ids: list[int]) -> bool:
        """Whether ``ids`` (an end dropped) is a span this index allows."""
        ids = [t for t in ids if t not in self.ends]
        n = len(ids)
        return (0 < n < self.cap + CHAR_TOKENS and not self.breaks.intersection(ids)
                and ids[0] in self.first and not self._split(ids)
                and any(self.source[i:i + n] == ids for i in self.starts.get(ids[0], ())))


def span_index(tokenizer, source_text: str, ends: frozenset[int],
               cap: int = SPAN_CAP) -> SpanIndex:
    """The spans of ``source_text`` in ``tokenizer``'s ids (as the prompt holds them: a block of
    the context starts a line, so the tokenizer splits it there as in the whole prompt)."""
    source = tokenizer.encode(source_text, add_special_tokens=False)
    breaks = frozenset(t for t in set(source) if "\n" in tokenizer.decode([t]))
    return SpanIndex(source, frozenset(ends), breaks, cap, tokenizer.decode)


def copy_processor(index: SpanIndex) -> PrefixConstrainedLogitsProcessor:
    """transformers' prefix-constrained processor over ``index``'s spans (greedy: one beam)."""
    return PrefixConstrainedLogitsProcessor(index.allowed, num_beams=1)
