"""The served reader (``ServedReader``, a ``Reader``: ``engine.serving.reader``) and decoding on
it: the local reader's prompt as chat messages (``engine.answer.generation.prompts.chat_messages``),
streamed from the server greedily with the same length limit, time limit and loop stop as local
decoding.

The loop stop (``engine.serving.stops``' two rules: the newest 16 tokens already generated, or
the newest 4 for the third time) runs on the streamed pieces, one piece per token as servers
send them (vLLM, llama.cpp, Ollama and ``transformers serve`` each send one token's text per
chunk); when it fires the stream is closed, which makes the server stop generating, and a cut
loop's pieces are dropped. Pieces are shown 16 late for that reason, as ``GuardedStreamer``
holds tokens back locally.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

from engine.serving.reader import Counter
from engine.serving.remote_reader import ReaderError, RemoteReader
from engine.serving.request import GenerationResult
from engine.serving.stops import LOOP_N, REPEAT_N, REPEAT_TIMES, repeats


# A served model's tokenizer is not here: the backbone's counts stand in for it when a mode
# measures text against the reader (the text budget, full mode's room), and full mode keeps this
# share of the served window free for the difference between the two tokenizers.
SERVED_WINDOW_MARGIN = 0.1


@dataclass(frozen=True)
class ServedReader:
    """The reader when it is served (``Settings.reader`` is a URL): the server's client, and the
    backbone whose tokenizer counts the text the modes measure for it."""

    remote: RemoteReader
    counter: Counter

    def encode(self, text: str) -> list[int]:
        return self.counter.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.counter.decode(ids)

    def context_window(self) -> int:
        """The served window (``RemoteReader.context_tokens``) less the margin above."""
        return int(self.remote.context_tokens() * (1 - SERVED_WINDOW_MARGIN))

    @property
    def label(self) -> str:
        return self.remote.label

    @property
    def title(self) -> str:
        """The model and where it is served, in a visitor's words."""
        return f"{self.remote.model}, served at {self.remote.base_url}"

    def chat_plan(self, messages: list[dict]) -> "ChatPlan":
        """The chat turns as they are: the server applies its own chat template."""
        return ChatPlan(self.remote, messages)


@dataclass(frozen=True)
class ChatPlan:
    """A text prompt for a served reader: the chat messages, decoded there (``RemoteStreamed``)."""

    reader: RemoteReader
    messages: list[dict]

    def streamed(self, decoding, workers=None) -> "RemoteStreamed":
        """Streamed from the server (which batches its own asks: no local worker). A copy
        constraint (``Decoding.copy_from``) is not applied: the chat API takes no logits
        processor, so a served reader's answer is decoded freely."""
        return RemoteStreamed(self.reader, self.messages, max_new_tokens=decoding.max_new_tokens,
                              max_time=decoding.max_time, guard=decoding.guard)


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
        try:
            stream = self.reader.stream(self.messages, max_tokens=self.max_new_tokens)
        except ReaderError as e:
            self.reader.note(False, str(e))
            raise
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
        except ReaderError as e:
            self.reader.note(False, str(e))
            raise
        finally:
            stream.close()  # early: the server stops generating
        self.reader.note(True, "answered")
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
