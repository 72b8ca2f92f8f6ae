"""What the page says about memories not written yet: which manuals wait, why, how many."""
from __future__ import annotations

import re

from app.shared.state import ALL, NOT_QUEUED, READY, WAIT_REASONS, AppState, picked_id
from storage.errors import DocumentNotFound

PAUSED = "memories paused: "  # the label of memories given back after a storage fault
# what works while a manual's memories are not written, in plain words (the paper's names in
# the choices' hover help)
WAITING = ("Text and route modes work now; memory mode and finding sections by their memories "
           "wait for them.")
HOW_TO_WRITE = ("to write them, upload the file again or run `python -m engine worker` on this "
                "library")


def pending_list(labels: dict[int, str]) -> str:
    """"#3: 40/120, #4: 0/80 (queued)" of the documents whose memories are not ready."""
    return ", ".join(f"#{i}: {lab.removeprefix('memories ')}"
                     for i, lab in labels.items() if lab != READY)


def picked_docs(s: AppState, doc) -> list:
    """The listed documents of a picked manual (or every manual: ``ALL``); none for a value
    that names no stored manual."""
    if doc != ALL and picked_id(doc) is None:
        return []
    try:
        return (s.rt.library.list_documents() if doc == ALL
                else [s.rt.library.get_document(picked_id(doc))])
    except DocumentNotFound:
        return []


def doc_labels(s: AppState, doc) -> dict[int, str]:
    """The memory labels of a picked manual (or of every manual: ``ALL``)."""
    return {d.id: s.memory_label(d) for d in picked_docs(s, doc)}


def memories_line(labels: dict[int, str], waiting: str) -> str:
    """One or two sentences on the memories not ready among ``labels``: those being written,
    and those nobody writes (indexed text-only) with how to write them; ``waiting``: what
    works meanwhile and what waits (a sentence). Empty when every one is ready."""
    paused = {i: lab for i, lab in labels.items() if lab.startswith(PAUSED)}
    after = WAIT_REASONS["indexing"]  # an example manual still being indexed
    indexing = {i: lab.replace(after, "") for i, lab in labels.items()
                if after in lab and i not in paused}
    written = {i: lab for i, lab in labels.items()
               if lab != READY and NOT_QUEUED not in lab and i not in paused
               and i not in indexing}
    idle = {i: lab.replace(NOT_QUEUED, "") for i, lab in labels.items() if NOT_QUEUED in lab}
    out = []
    if paused:  # a storage fault (a full disk, the database gone): they resume once it is fixed
        out.append("Memories are paused (" + ", ".join(
            f"#{i}: {lab.removeprefix(PAUSED)}" for i, lab in paused.items())
            + "); they resume once that is fixed.")
    if indexing:
        out.append(f"The manual is being indexed; its memories are written next "
                   f"({pending_list(indexing)}).")
    if written:
        out.append(f"Memories are being written ({pending_list(written)}).")
    if idle:
        out.append(f"Memories are not written and not queued ({pending_list(idle)}): "
                   f"{HOW_TO_WRITE}.")
    return " ".join([*out, waiting]) if out else ""


def doc_memory_line(s: AppState, doc, labels: dict[int, str] | None = None) -> str:
    """The Ask tab's line about the chosen manual's memories (empty when they are ready)."""
    if doc in (None, ""):
        return ""
    if labels is None:
        labels = doc_labels(s, doc)
    elif doc != ALL:
        if (doc_id := picked_id(doc)) is None:
            return ""
        labels = {doc_id: labels.get(doc_id, READY)}
    return memories_line(labels, WAITING)


def doc_counts(s: AppState, doc) -> tuple[int, int, bool]:
    """(written, nodes, being written?) of the memories not ready of a picked manual (or of
    every manual), as the library shows them; being written is False when none is queued."""
    done = total = 0
    queued = False
    for d in picked_docs(s, doc):
        try:
            counts = s.memory_counts(d)
        except DocumentNotFound:
            continue
        if counts is not None:
            done, total = done + counts[0], total + counts[1]
            queued = queued or counts[2] in WAIT_REASONS
    return done, total, queued


def paused_cause(s: AppState, doc) -> str | None:
    """Why the memories of a picked manual (or of any manual) are paused: a storage fault met
    while writing them ("the disk is full"); None when they are not."""
    for d in picked_docs(s, doc):
        try:
            counts = s.memory_counts(d)
        except DocumentNotFound:
            continue
        if counts is not None and counts[2] == "paused":
            return s.writer.causes.get(d.id, "a storage fault")
    return None


# The engine's words on memories still being written (engine.documents.pending_line), whose
# count the page replaces with the library's (``agreeing_notice``).
ENGINE_PENDING = re.compile(r"memories are being written \(\d+/\d+ nodes\)")


def agreeing_notice(s: AppState, doc, text: str) -> str:
    """An engine notice as the page shows it: its count of memories written replaced by the one
    the library shows (``doc_counts``), "not written" where nobody writes them, and its first
    letter a capital."""
    if ENGINE_PENDING.search(text):
        done, total, queued = doc_counts(s, doc)  # an example still indexing counts as queued
        cause = paused_cause(s, doc)
        words = (f"memories are paused ({cause}; {done}/{total} nodes written)" if cause
                 else f"memories are being written ({done}/{total} nodes)" if queued
                 else f"memories are not written ({done}/{total} nodes; {HOW_TO_WRITE})")
        text = ENGINE_PENDING.sub(words, text)
    return text[:1].upper() + text[1:]


def pending_unavailable(s: AppState, doc) -> str:
    """Why the memory router's selection is missing, for the disagreement view."""
    done, total, queued = doc_counts(s, doc)
    if done < total:
        return (f"finding sections by their memories waits for them ({done}/{total} written)"
                if queued else f"finding sections by their memories needs them (not written: "
                               f"{HOW_TO_WRITE})")
    return "finding sections by their memories did not run for this question"
