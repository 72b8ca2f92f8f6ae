"""One ingest's sentence vectors: each text encoded once (``SharedVectors``), the induced
tree's chunk vectors reused as their dense routing evidence (H2MT 4.3)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from engine.document.tree import Tree
from engine.routing.evidence import evidence_text, has_evidence


class SharedVectors:
    """The dense channel's sentence encoder with a memory of what it encoded in one ingest.

    ``embed`` is what tree induction calls for its chunk vectors (H2MT 4.3); ``for_evidence``
    gives the encoder ``routing.evidence.compute_evidence`` reads, which takes those vectors
    back instead of encoding the chunks again. The dense evidence of an induced tree's leaf is
    therefore the vector of its chunk text, the text its clusters were found from, not of
    "guessed heading path + text" as for other nodes: the guessed titles are words of the
    chunks themselves, and leaving them out is what lets one vector serve both (a re-index of a
    stored induced tree follows the same rule, so both give the same vectors). Every other
    evidence text is encoded as it is, each distinct text once.
    """

    def __init__(self, encoder):
        self.encoder = encoder
        self.vectors: dict[str, np.ndarray] = {}

    def _encode_missing(self, texts: list[str],
                        progress: Callable[[int, int], None] | None = None) -> None:
        missing = list(dict.fromkeys(t for t in texts if t.strip() and t not in self.vectors))
        if missing:
            rows = np.asarray(self.encoder.encode(missing, progress=progress), dtype=np.float32)
            self.vectors.update(zip(missing, rows))
        elif progress is not None:
            progress(0, 0)

    def _rows(self, texts: list[str]) -> np.ndarray:
        zero = np.zeros(self.encoder.dim, dtype=np.float32)
        return np.stack([self.vectors.get(t, zero) for t in texts]) if texts else \
            np.zeros((0, self.encoder.dim), dtype=np.float32)

    def embed(self, texts: list[str],
              progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Unit rows for ``texts`` (the induced tree's ``embed``), remembered by text."""
        texts = list(texts)
        self._encode_missing(texts, progress)
        return self._rows(texts)

    def for_evidence(self, tree: Tree) -> "_EvidenceEncoder":
        """The encoder ``compute_evidence`` gets for ``tree`` (see the class docstring)."""
        chunk_text = {}
        if tree.source == "induced":
            for n in tree.leaves():
                if has_evidence(tree, n.id) and n.text.strip():
                    chunk_text[evidence_text(tree, n.id)] = n.text
        return _EvidenceEncoder(self, chunk_text)


class _EvidenceEncoder:
    """``SharedVectors`` as compute_evidence calls an encoder (``encode``, ``fingerprint``)."""

    def __init__(self, shared: SharedVectors, chunk_text: dict[str, str]):
        self.shared = shared
        self.chunk_text = chunk_text
        self.fingerprint = shared.encoder.fingerprint
        self.dim = shared.encoder.dim

    def encode(self, texts: list[str], *,
               progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        texts = [self.chunk_text.get(t, t) for t in texts]
        n = len(texts)
        known = sum(1 for t in texts if not t.strip() or t in self.shared.vectors)

        def report(done: int, total: int) -> None:  # rows already known count as done
            if progress is not None:
                progress(min(n, known + round(done * (n - known) / total)) if total else n, n)

        self.shared._encode_missing(texts, report)
        return self.shared._rows(texts)
