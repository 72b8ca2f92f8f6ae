"""An ingest's time limit, checked inside every long step of building a tree (parsing, chunking,
encoding, clustering) as well as while evidence and memories are computed: an untrusted file
never holds the indexing slot past its deadline (issue 44)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from engine.document.tree import DocumentError


class IngestTimeout(DocumentError):
    """Indexing ran past its time limit (nothing was stored)."""


@dataclass
class Deadline:
    """``check(stage)`` raises IngestTimeout once ``seconds`` have passed since it was made
    (None: never). One clock read a call: cheap enough for every chunk."""
    name: str
    seconds: float | None
    started: float = field(default_factory=time.monotonic)

    def check(self, stage: str = "indexing") -> None:
        if self.seconds is not None and time.monotonic() - self.started > self.seconds:
            raise IngestTimeout(f"{self.name}: indexing took longer than {self.seconds:g} s "
                                f"(while {stage}) and was stopped; what was not finished was "
                                "not stored")
