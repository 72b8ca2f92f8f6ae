"""Ingest end to end with the real SmolLM2 backbone: CLI, storage round trip, fingerprints."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engine.ingest import ingest_file
from engine.memory.parts import H2MTParts
from engine.runtime import Runtime
from engine.settings import Settings
from storage import Library, StaleMemories

pytestmark = pytest.mark.real_model
REPO = Path(__file__).resolve().parents[1]

MANUAL_MD = """# Widget manual
Widgets are configured with a file called widget.conf.

## Installing
Run the installer and answer the questions. The installer writes widget.conf for you.

## Sizes
### Small widgets
Small widgets fit in one hand and need no power supply.
### Large widgets
Large widgets need a 12 V supply. Never connect them to 230 V.
"""


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=REPO, text=True,
                          capture_output=True, timeout=600)


def test_cli_ingests_a_pdf_without_outline_and_recognises_it_again(shared_dir, tmp_path):
    """Phase one only (--text-only): the real backbone's memories of this manual take most of
    two minutes on one core; the CLI writes them in tests/test_crash.py (phase two, killed and
    resumed) and the app in tests/app (upload, then ask in memory mode)."""
    db = f"sqlite:///{tmp_path / 'lib.sqlite3'}"
    pdf = shared_dir / "corpus" / "camlidl-manual_no-outline.pdf"
    first = run_cli("ingest", "--text-only", str(pdf), "--db", db)
    assert first.returncode == 0, first.stderr
    row = json.loads(first.stdout.strip().splitlines()[-1])
    for key in ("doc_id", "title", "source", "nodes", "leaves", "depth", "pages", "tokens",
                "tree_ms", "memory_ms"):
        assert key in row
    assert row["source"] == "fonts" and row["pages"] == 26 and row["depth"] >= 2
    assert row["nodes"] >= 34 and not row["reused"]
    assert row["memories"] == "pending"
    again = json.loads(run_cli("ingest", "--text-only", str(pdf), "--db", db).stdout.strip())
    assert again["reused"] and again["doc_id"] == row["doc_id"]
    outline = run_cli("tree", str(row["doc_id"]), "--db", db)
    assert outline.returncode == 0 and "3.2 Pointers" in outline.stdout


def test_cli_reports_bad_files_and_keeps_going(tmp_path):
    bad = tmp_path / "fake.pdf"
    bad.write_text("not a pdf at all")
    good = tmp_path / "notes.md"
    good.write_text(MANUAL_MD)
    out = run_cli("ingest", str(bad), str(good), "--db", f"sqlite:///{tmp_path / 'l.sqlite3'}")
    lines = [json.loads(x) for x in out.stdout.strip().splitlines()]
    assert out.returncode == 1
    assert "not a PDF" in lines[0]["error"]
    assert lines[1]["source"] == "markdown" and lines[1]["nodes"] >= 6


def test_stored_memories_equal_written_and_fingerprint_rule(real_backbone, tmp_path):
    md = tmp_path / "widgets.md"
    md.write_text(MANUAL_MD)
    settings = Settings(data_dir=tmp_path, cache_dir=Settings().cache_dir)
    parts = H2MTParts(real_backbone.hidden_size, "mean").init_from_backbone(real_backbone)
    rt = Runtime(settings, real_backbone, parts, Library(settings.database_url))
    result = ingest_file(md, rt)
    stored = rt.library.get_memories(result.doc_id, rt.fingerprint)
    tree = rt.library.get_tree(result.doc_id)
    from engine.memory.writer import write_memories
    fresh = write_memories(tree, rt.backbone, rt.parts, **rt.settings.write_batches)
    assert set(stored) == set(fresh) == set(tree.graph.nodes)
    for nid in stored:
        assert stored[nid].dtype == torch.float32
        torch.testing.assert_close(stored[nid], fresh[nid], rtol=1e-4, atol=1e-4)
    # Memories of different nodes differ (the writer is not collapsing everything).
    vecs = torch.stack([stored[n] for n in sorted(stored)])
    assert torch.cdist(vecs, vecs).fill_diagonal_(1.0).min() > 1e-3
    # Another policy means another fingerprint: the stored memories are never handed out for it.
    other = H2MTParts(real_backbone.hidden_size, "gat").init_from_backbone(real_backbone)
    rt2 = Runtime(settings, real_backbone, other, rt.library)
    with pytest.raises(StaleMemories):
        rt.library.get_memories(result.doc_id, rt2.fingerprint)
    # Ingesting the same file under the new fingerprint rewrites memories, keeps the document.
    again = ingest_file(md, rt2)
    assert again.doc_id == result.doc_id and again.reused
    assert len(rt.library.get_memories(result.doc_id, rt2.fingerprint)) == len(tree)


EVIDENCE_MANUAL = """# Widget manual

## Installing

Run the installer and answer its questions. The installer writes widget.conf for you.

## Power

Large widgets need a 12 V supply. Small widgets run on two AA batteries.

## Colours

Widgets come in red, green and blue paint. Custom colours cost extra.
"""


def test_evidence_stored_in_float32_is_encoded_again_under_bfloat16(
        tmp_path, tiny_backbone, tiny_parts):
    """``Settings.evidence_precision``: the nodes' evidence vectors carry their precision in
    their fingerprint; a library indexed in float32 and opened with bfloat16 evidence does not
    read the float32 vectors as bfloat16 ones: they are encoded again and replace them."""
    import numpy as np

    from engine.ingest import document_evidence, evidence_encoder
    from engine.routing.evidence import evidence_fingerprint

    manual = tmp_path / "widget.md"
    manual.write_text(EVIDENCE_MANUAL, encoding="utf-8")
    data = tmp_path / "data"

    def runtime(precision: str) -> Runtime:
        settings = Settings(data_dir=data, cache_dir=Settings().cache_dir,
                            evidence_precision=precision)
        return Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))

    full = runtime("fp32")
    doc = ingest_file(manual, full, memories=False).doc_id
    fp32 = evidence_fingerprint(evidence_encoder(full))
    assert fp32.endswith("|fp32") and evidence_encoder(full) is full.encoder
    stored = full.library.get_evidence(doc, fp32)
    assert stored is not None and stored.dense is not None

    half = runtime("bf16")
    bf16 = evidence_fingerprint(evidence_encoder(half))
    assert bf16 == fp32.replace("|fp32", "|bf16")
    assert half.library.get_evidence(doc, bf16) is None  # not read as bfloat16
    ev = document_evidence(doc, half.library.get_tree(doc), half)
    assert ev.fingerprint == bf16
    assert half.library.get_evidence(doc, fp32) is None  # replaced
    assert half.library.get_evidence(doc, bf16) is not None
    rows = [i for i in range(len(ev.dense)) if np.any(stored.dense[i])]
    assert rows and not np.array_equal(ev.dense[rows], stored.dense[rows])
    cosines = np.sum(ev.dense[rows] * stored.dense[rows], axis=1)
    assert cosines.min() > 0.99  # the same texts, read in bfloat16
