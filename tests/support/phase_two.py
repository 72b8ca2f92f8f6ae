"""Phase two (memory writing) under test: a tiny backbone saved to a folder for a CLI process
(``tiny_model_dir``), a manual whose tree heights take about as long as each other
(``chain_manual``), the stored memory blobs of a document (``stored_blobs``) and the memory rows
INSERTed while inside ``memory_inserts``."""
from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

# A tiny backbone saved to a folder (the CLI loads it as H2MT_BACKBONE, with its parts as
# H2MT_CHECKPOINT), so phase two takes a second or two and each run is mostly process start-up;
# a Markdown manual of parallel heading chains, so every tree height holds CHAINS nodes and takes
# about as long as the next one.

CHAINS, CHAIN_LEVELS = 12, 5  # twelve chains "## ... ######": five heights of twelve nodes
_WORDS = "the valve controller reads the bus and sets the pump speed after calibration".split()


def chain_manual(path: Path) -> Path:
    lines = ["# Chained manual\n\nHow the controllers are chained.\n"]
    for c in range(CHAINS):
        for level in range(2, 2 + CHAIN_LEVELS):
            body = " ".join(_WORDS[(c + level + j) % len(_WORDS)] for j in range(60))
            lines.append(f"{'#' * level} Chain {c} level {level}\n\n{body} ({c}.{level}).\n")
    path.write_text("\n".join(lines))
    return path


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory, tiny_backbone, tiny_parts) -> Path:
    folder = tmp_path_factory.mktemp("tiny-backbone")
    tiny_backbone.model.save_pretrained(folder)
    tiny_backbone.tokenizer.save_pretrained(folder)
    tiny_parts.save(folder / "parts.safetensors")
    return folder


def stored_blobs(engine, doc_id: int) -> dict[int, bytes]:
    from sqlalchemy import text

    with engine.connect() as con:
        rows = con.execute(text("SELECT node_id, blob FROM memories WHERE doc_id = :d"),
                           {"d": doc_id})
        return {int(n): bytes(b) for n, b in rows}


@contextlib.contextmanager
def memory_inserts(engine):
    """The node ids of every memory row INSERTed through ``engine`` while inside."""
    from sqlalchemy import event
    from sqlalchemy.sql.dml import Insert

    seen: list[int] = []

    def before_execute(conn, clause, multiparams, params, execution_options):
        if isinstance(clause, Insert) and clause.table.name == "memories":
            rows = [p for batch in multiparams
                    for p in (batch if isinstance(batch, (list, tuple)) else [batch])]
            seen.extend(int(r["node_id"]) for r in [*rows, *([params] if params else [])])

    event.listen(engine, "before_execute", before_execute)
    try:
        yield seen
    finally:
        event.remove(engine, "before_execute", before_execute)
