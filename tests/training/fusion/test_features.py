"""The fusion's training documents (engine.training.fusion.features): evaluation data refused."""
from __future__ import annotations

import shutil

import pytest

from engine.training.fusion.config import FusionConfig
from engine.training.fusion.features import document_paths


def _cfg(tmp_path, doc, shared):
    return FusionConfig(packages=[], documents=[str(doc)], validation=[], data_dir=tmp_path,
                        shared_dir=shared, out_dir=tmp_path / "run")


def test_training_refuses_evaluation_documents(tmp_path):
    shared = tmp_path / "shared"
    (shared / "corpus").mkdir(parents=True)
    (shared / "bench").mkdir()
    (shared / "corpus" / "manual.pdf").write_bytes(b"%PDF-1.4 evaluation manual")
    same_name = tmp_path / "docs" / "manual.pdf"
    same_name.parent.mkdir()
    same_name.write_bytes(b"%PDF-1.4 other bytes")
    copied = tmp_path / "docs" / "renamed.pdf"
    shutil.copy(shared / "corpus" / "manual.pdf", copied)
    fine = tmp_path / "docs" / "training.pdf"
    fine.write_bytes(b"%PDF-1.4 a training document")
    for doc in (same_name, copied):
        with pytest.raises(ValueError, match="evaluation data"):
            document_paths(_cfg(tmp_path, doc, shared))
    assert document_paths(_cfg(tmp_path, fine, shared)) == {str(fine): fine}


def test_training_refuses_the_real_corpus(tmp_path, shared_dir):
    manual = next((shared_dir / "corpus").glob("*.pdf"))
    with pytest.raises(ValueError, match="evaluation data"):
        document_paths(_cfg(tmp_path, manual, shared_dir))
