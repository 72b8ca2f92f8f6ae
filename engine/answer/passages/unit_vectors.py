"""A manual's passage units encoded once, not at every ask.

The quote stage reads the sentence encoder's vector of candidate units: each unit's window as
"heading path: text" for the linear score (``sentences.score``), or each unit and heading path
for the passage ranker (``ranking``). Those texts are the manual's, the same at every ask, so
each is encoded once and its vector kept in the library (``storage.unit_vectors``), keyed by the
text's digest: all of a document's at once (``precompute``: ``engine ingest``, or after an
upload the app's background passage worker, ``engine.passage_worker``, a chunk stored at a
time), or, for texts not stored yet, the first time an ask needs them (``StoredEncoder`` stores
what it had to encode). An ask about a stored document then encodes only its question; one
made while the background worker runs encodes only its candidates not stored yet.
"""
from __future__ import annotations

import hashlib
import threading

import numpy as np

from engine.answer.passages.passage_index import PassageIndex
from engine.answer.passages.sentences import windows

# Bumped whenever the unit split or the text built from a unit changes (older rows are then
# dropped as new ones are stored; a lookup is by the text itself, so a stale row is never read).
UNITS_VERSION = 3
_LOCK = threading.Lock()


def digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


# What a stored text is (each kind under its own fingerprint): a unit's window as "path: text"
# (the linear score, ``sentences.score``), a unit or a heading path (the passage ranker,
# ``ranking``), or a sentence or line of the manual read after the answer (its evidence lines and
# the check's similarity).
WINDOWS, UNITS, SENTENCES = "windows", "units", "sentences"


def quote_kind(ranked_by_ranker: bool) -> str:
    """The kind of text the quote stage encodes: the ranker's units, else the windows."""
    return UNITS if ranked_by_ranker else WINDOWS


def texts_of(index: PassageIndex, kind: str) -> list[str]:
    """Every text the quote stage may encode for this document (``WINDOWS`` or ``UNITS``), each
    once, under the unit's heading path as scoring reads it (``path``: its entry's name,
    identifiers as words), not the raw heading."""
    ps = index.passages
    if kind == WINDOWS:
        return list(dict.fromkeys(f"{p.path}: {w}" if p.path else w
                                  for p, w in zip(ps, windows(ps))))
    if kind != UNITS:
        raise ValueError(f"no precomputed texts of kind {kind!r}")
    units = [f"{p.path}: {p.text}" if p.path else p.text for p in ps]
    return list(dict.fromkeys(units + sorted({p.path for p in ps if p.path})))


def encoder_of(rt, kind: str):
    """The encoder of one ``kind``'s texts: the windows' in the precision the settings name
    (``Settings.window_precision``, ``dense.for_windows``: bfloat16 where the hardware computes
    it natively), the others' the runtime's encoder as it is."""
    if kind != WINDOWS:
        return rt.encoder
    from engine.routing.dense import for_windows

    return for_windows(rt.encoder, rt.settings.window_precision)


def fingerprint(encoder, kind: str) -> str:
    return f"{encoder.fingerprint}|units{UNITS_VERSION}|{kind}"


def known_vectors(rt, doc_id: int, kind: str) -> dict[bytes, np.ndarray]:
    """Digest -> vector of the document's stored texts of one ``kind``, read once per runtime
    and kept (the ``StoredEncoder``s of later asks add to the same dict)."""
    key = ("unit_vectors", doc_id, fingerprint(encoder_of(rt, kind), kind))
    with _LOCK:
        if key not in rt.cache:
            rows = rt.library.get_unit_vectors(doc_id, key[2])
            rt.cache[key] = {k: np.frombuffer(v, dtype="<f2").astype(np.float32)
                             for k, v in rows.items()}
        return rt.cache[key]


class StoredEncoder:
    """The sentence encoder, answering from a document's stored texts first; a text it has to
    encode is stored (``store``) for the next ask. ``misses``: texts encoded by this one."""

    def __init__(self, encoder, known: dict[bytes, np.ndarray], store=None):
        self.encoder, self.known, self.store, self.misses = encoder, known, store, 0
        self.dim = encoder.dim
        self.fingerprint = encoder.fingerprint

    def encode(self, texts: list[str], **kwargs) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        keys = [digest(t) for t in texts]
        missing = []
        for i, k in enumerate(keys):
            v = self.known.get(k)
            if v is None:
                missing.append(i)
            else:
                out[i] = v
        if missing:
            vecs = np.asarray(self.encoder.encode([texts[i] for i in missing], **kwargs),
                              dtype=np.float32)
            out[missing] = vecs
            self.misses += len(missing)
            new = {keys[i]: vecs[j].astype("<f2") for j, i in enumerate(missing)}
            with _LOCK:  # the background writer and other asks add to the same dict
                self.known.update((k, v.astype(np.float32)) for k, v in new.items())
            if self.store is not None:
                self.store({k: v.tobytes() for k, v in new.items()})
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return self.encoder.encode_query(text)


def stored_encoder(rt, doc_ids: list[int], kind: str) -> StoredEncoder:
    """The encoder of the manual's texts of one ``kind`` for an ask about ``doc_ids``: one
    document's texts are looked up and stored; with several, the texts are looked up in each and
    not stored (a text's document is not known)."""
    known: dict[bytes, np.ndarray] = {}
    store = None
    encoder = encoder_of(rt, kind)
    if len(doc_ids) == 1:
        known = known_vectors(rt, doc_ids[0], kind)
        fp = fingerprint(encoder, kind)
        store = (lambda items, d=doc_ids[0]: rt.library.add_unit_vectors(d, fp, items))
    else:
        for d in doc_ids:
            rows = known_vectors(rt, d, kind)
            with _LOCK:  # copied while no writer adds to it
                known = {**known, **rows}
    return StoredEncoder(encoder, known, store)


def pending_texts(rt, doc_id: int, index: PassageIndex, kind: str) -> list[str]:
    """The document's texts of ``kind`` whose vectors are not stored yet, in the encoder's
    order (most word pieces first, as ``SentenceEncoder.encode`` batches them)."""
    known = known_vectors(rt, doc_id, kind)
    todo = [t for t in texts_of(index, kind) if digest(t) not in known]
    lengths = getattr(rt.encoder, "_lengths", None)
    if lengths is not None and len(todo) > 1:
        n = lengths(todo)
        todo = [todo[i] for i in sorted(range(len(todo)), key=lambda i: (-n[i], i))]
    return todo


# Texts encoded and stored together by ``precompute`` (a multiple of the CPU batch of 64): what
# an interrupted run loses at most, and how often an ask beside it sees the new vectors.
STORE_EVERY = 512


def precompute(rt, doc_id: int, index: PassageIndex, kind: str, progress=None, *,
               store_every: int | None = None, stop=None) -> int:
    """Encode and store every text of the document not stored yet, ``store_every`` texts at a
    time (each chunk stored as it is encoded, so an interrupted run resumes from there), in the
    encoder's batches; ``progress(done, total)``; ``stop()``: true to stop after a chunk. How
    many were added (a text an ask stored meanwhile is not encoded again).

    The texts are put in the encoder's own order first and cut into chunks of whole batches,
    so every batch holds the texts it holds when all of them are encoded in one call: the
    vectors do not depend on the chunking (a ``store_every`` below the encoder's batch, as
    tests set it, makes smaller batches)."""
    todo = pending_texts(rt, doc_id, index, kind)
    if not todo:
        return 0
    known = known_vectors(rt, doc_id, kind)
    encoder = encoder_of(rt, kind)
    enc = StoredEncoder(encoder, known, lambda items: rt.library.add_unit_vectors(
        doc_id, fingerprint(encoder, kind), items))
    every = max(1, int(store_every or STORE_EVERY))
    batch = max(1, int(getattr(rt.encoder, "batch_size", 64)))
    step = every // batch * batch or every  # whole batches (fewer texts: smaller batches)
    total = len(todo)
    for start in range(0, total, step):
        if stop is not None and stop():
            break
        part = todo[start:start + step]
        report = None if progress is None else (
            lambda done, _n, s=start: progress(s + done, total))
        enc.encode(part, progress=report)
    return enc.misses
