"""The text of a generation as it comes: ``GuardedStreamer`` (tokens to text pieces, held back
while the loop stop may still cut them) and ``stripped`` (the pieces without the answer's outer
white space)."""
from __future__ import annotations

import queue
from typing import Iterator

from transformers import TextIteratorStreamer

from engine.serving.stops import LOOP_N, RepeatStop

DECODE = dict(skip_special_tokens=True, clean_up_tokenization_spaces=False)


class GuardedStreamer(TextIteratorStreamer):
    """A ``TextIteratorStreamer`` (iterate it for text pieces) that shows the generated text
    ``hold`` tokens late and, at the end, drops what the ``guard`` (a RepeatStop) cut off: the
    pieces join to exactly the decoded kept tokens."""

    def __init__(self, tokenizer, hold: int = LOOP_N, guard: RepeatStop | None = None):
        super().__init__(tokenizer, skip_prompt=True, **DECODE)
        self.hold, self.guard = hold, guard
        self.ids: list[int] = []
        self.shown = ""
        self._ended = False  # the end was read while joining waiting pieces (``__next__``)

    def _show(self, ids: list[int], end: bool = False) -> None:
        text = self.tokenizer.decode(ids, **DECODE)
        if not end and (text.endswith("\ufffd") or not text.startswith(self.shown)):
            return  # a character still incomplete: wait for its next byte
        piece = text[len(self.shown):] if text.startswith(self.shown) else ""
        self.shown += piece
        if piece or end:
            self.on_finalized_text(piece, stream_end=end)

    def put(self, value) -> None:
        if len(value.shape) > 1:
            value = value[0]
        if self.next_tokens_are_prompt:  # the (empty, with inputs_embeds) prompt
            self.next_tokens_are_prompt = False
            return
        self.ids.extend(value.tolist())
        if len(self.ids) > self.hold:
            self._show(self.ids[: len(self.ids) - self.hold])

    def __next__(self) -> str:
        """The next text piece, with every piece already waiting joined to it: a reader slower
        than the decoding (a busy server streaming to many visitors) takes what is ready in one
        piece instead of one token at a time. The pieces still join to the same text."""
        if self._ended:
            raise StopIteration
        piece = super().__next__()
        while True:
            try:
                more = self.text_queue.get_nowait()
            except queue.Empty:
                return piece
            if more is self.stop_signal:
                self._ended = True
                return piece
            piece += more

    def end(self) -> None:
        trim = self.guard.trim if self.guard is not None else 0
        self._show(self.ids[: len(self.ids) - trim], end=True)
        self.next_tokens_are_prompt = True


def stripped(chunks: Iterator[str]) -> Iterator[str]:
    """The chunks with the answer's leading and trailing whitespace left out (trailing space is
    held back until text follows it), so that they join to the final answer text."""
    started, pending = False, ""
    for c in chunks:
        if not started:
            c = c.lstrip()
            if not c:
                continue
            started = True
        c = pending + c
        body = c.rstrip()
        pending = c[len(body):]
        if body:
            yield body
