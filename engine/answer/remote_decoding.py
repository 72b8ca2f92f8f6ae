"""Decoding on a served reader: the local reader's prompt as chat messages, streamed from the
server greedily with the same length limit, time limit and loop stop as local decoding.

The loop stop (``engine.answer.guard``'s two rules: the newest 16 tokens already generated, or
the newest 4 for the third time) runs on the streamed pieces, one piece per token as servers
send them (vLLM, llama.cpp, Ollama and ``transformers serve`` each send one token's text per
chunk); when it fires the stream is closed, which makes the server stop generating, and a cut
loop's pieces are dropped. Pieces are shown 16 late for that reason, as ``GuardedStreamer``
holds tokens back locally.
"""
from __future__ import annotations

import time
from typing import Iterator

from engine.answer.guard import LOOP_N, REPEAT_N, REPEAT_TIMES, repeats
from engine.answer.modes import GenerationResult
from engine.answer.remote_reader import RemoteReader


def chat_messages(user_text: str, system: str) -> list[dict]:
    """The system and user turns the local reader's chat template renders
    (``engine.answer.modes.chat_parts``); a served reader applies its own template to them."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user_text}]


class RemoteStreamed:
    """One greedy generation on a served reader, streamed: iterating yields the answer's text
    pieces (held ``LOOP_N`` pieces back while the loop stop may still cut them); afterwards
    ``result`` holds the ``GenerationResult`` (``first_token_at``: when the first piece came).
    Server failures raise ``ReaderError`` (one line) from the iteration."""

    def __init__(self, reader: RemoteReader, messages: list[dict], *, max_new_tokens: int,
                 max_time: float | None = None, guard: bool = True):
        self.reader, self.messages = reader, messages
        self.max_new_tokens, self.max_time, self.guard = max_new_tokens, max_time, guard
        self.result: GenerationResult | None = None

    def __iter__(self) -> Iterator[str]:
        hold = LOOP_N if self.guard else 0
        start = time.perf_counter()
        stream = self.reader.stream(self.messages, max_tokens=self.max_new_tokens)
        pieces: list[str] = []
        shown, stop, trim = 0, None, 0
        try:
            for piece in stream:
                pieces.append(piece)
                if self.guard and repeats(pieces, LOOP_N) >= 2:
                    stop, trim = "loop", LOOP_N
                elif self.guard and repeats(pieces, REPEAT_N) >= REPEAT_TIMES:
                    stop = "repeat"
                elif self.max_time is not None and time.perf_counter() - start > self.max_time:
                    stop = "time"
                if stop:
                    break
                while shown < len(pieces) - hold:
                    yield pieces[shown]
                    shown += 1
        finally:
            stream.close()  # early: the server stops generating
        kept = len(pieces) - trim
        while shown < kept:
            yield pieces[shown]
            shown += 1
        r = stream.result
        if stop is None:
            stop = "length" if r.finish_reason == "length" else "eos"
        self.result = GenerationResult(
            text="".join(pieces[:kept]).strip(), prefill_tokens=r.prompt_tokens or 0,
            generated_tokens=r.completion_tokens or len(pieces), first_token_at=r.first_piece_at,
            stop=stop)
