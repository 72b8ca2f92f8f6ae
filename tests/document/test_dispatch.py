"""build_raw_tree's choice of builder and its user-facing errors."""
from __future__ import annotations

import pytest

from engine.document.builders import build_raw_tree
from engine.document.tree import DocumentError


@pytest.mark.parametrize("name,data,message", [
    ("empty.pdf", b"", "is empty"),
    ("blank.md", b"  \n\n", "is empty"),
    ("fake.pdf", b"hello, not a pdf", "not a PDF"),
    ("sheet.xlsx", b"PK\x03\x04junk", "unsupported file type"),
    ("junk.md", bytes(range(256)) * 8, "binary"),
    ("broken.pdf", b"%PDF-1.4\n garbage", "damaged PDF"),
])
def test_user_errors(tmp_path, name, data, message):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DocumentError, match=message):
        build_raw_tree(path)


def test_missing_file(tmp_path):
    with pytest.raises(DocumentError, match="not found"):
        build_raw_tree(tmp_path / "nope.md")


def test_pdf_found_by_content_not_name(shared_dir, tmp_path):
    path = tmp_path / "manual.bin"
    path.write_bytes((shared_dir / "corpus" / "camlidl-manual_no-outline.pdf").read_bytes())
    assert build_raw_tree(path).source == "fonts"
