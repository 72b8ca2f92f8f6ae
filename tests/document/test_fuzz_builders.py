"""Fuzzing the tree builders: mutated real PDFs and random Markdown never crash them.

The only exception a builder may raise is DocumentError (the user's file is bad); anything else
is a bug. A tree that comes out must be valid. The number of cases run is printed.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.document.builders import build_raw_tree
from engine.document.tree import DocumentError

PDF = "camlidl-manual_no-outline.pdf"
PDF_CASES = 60
MD_CASES = 200


def _build(path: Path, data: bytes, counts: dict) -> None:
    path.write_bytes(data)
    try:
        tree = build_raw_tree(path)
    except DocumentError as e:
        assert str(e), "a DocumentError carries a message"
        counts["rejected"] += 1
    else:
        tree.validate()
        counts["built"] += 1
    counts["cases"] += 1


@st.composite
def pdf_mutations(draw, original: bytes):
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "overwrite"]))
        n = len(data)
        pos = draw(st.integers(0, max(n - 1, 0)))
        if kind == "flip":
            for k in range(draw(st.integers(1, 16))):
                data[(pos + k * 997) % n] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[max(pos, 8):]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=64))
        elif kind == "delete":
            del data[pos:pos + draw(st.integers(1, 4096))]
        else:
            chunk = draw(st.binary(min_size=1, max_size=512))
            data[pos:pos + len(chunk)] = chunk
    return bytes(data)


def test_fuzz_pdf_mutations(shared_dir, tmp_path):
    original = (shared_dir / "corpus" / PDF).read_bytes()
    counts = {"cases": 0, "built": 0, "rejected": 0}
    path = tmp_path / "mutant.pdf"

    @settings(max_examples=PDF_CASES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(pdf_mutations(original))
    def run(data):
        _build(path, data, counts)

    run()
    print(f"\nPDF fuzz: {counts}")
    assert counts["cases"] >= PDF_CASES


_LINE = st.one_of(
    st.builds(lambda n, t: "#" * n + " " + t, st.integers(1, 8), st.text(max_size=40)),
    st.text(max_size=120),
    st.sampled_from(["", "```", "```python", "---", "***", "> quote", "- item", "1. item",
                     "<script>alert(1)</script>", "&amp; &lt;", "| a | b |", "|---|---|",
                     "<div>", "</div>", "    indented code", "#", "######", "#no space",
                     "Setext\n===", "Setext\n---", "[link](javascript:alert(1))", "\t"]),
    st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
)


def test_fuzz_markdown(tmp_path):
    counts = {"cases": 0, "built": 0, "rejected": 0}
    path = tmp_path / "random.md"

    @settings(max_examples=MD_CASES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(_LINE, max_size=40), st.sampled_from(["utf-8", "latin-1", "junk"]))
    def run(lines, encoding):
        text = "\n".join(lines)
        if encoding == "junk":
            data = text.encode("utf-8", "replace") + bytes(range(0, 32)) * 3
        else:
            data = text.encode(encoding, "replace")
        _build(path, data, counts)

    run()
    print(f"\nMarkdown fuzz: {counts}")
    assert counts["cases"] >= MD_CASES
    assert counts["built"] > 0 and counts["rejected"] > 0


@pytest.mark.parametrize("suffix", [".txt", ".html"])
def test_fuzz_text_and_html(tmp_path, suffix):
    counts = {"cases": 0, "built": 0, "rejected": 0}
    path = tmp_path / f"random{suffix}"

    @settings(max_examples=40, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(_LINE, max_size=30))
    def run(lines):
        _build(path, "\n".join(lines).encode("utf-8", "replace"), counts)

    run()
    print(f"\n{suffix} fuzz: {counts}")
    assert counts["cases"] >= 40
