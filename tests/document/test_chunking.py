"""Chunking for induced trees (H2MT 4.3): a very long line is cut early and cheaply, with the
real tokenizer counting."""
from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest

from engine.document.chunking import MAX_TOKEN_CHARS, Unit, chunk_units, windows

GPL3 = Path("/usr/share/common-licenses/GPL-3")
TARGET = 128


@pytest.fixture(scope="module")
def count(real_tokenizer):
    return lambda text: len(real_tokenizer.encode(text, add_special_tokens=False))


def _chunks_and_counted(text: str, count) -> tuple[list, list[int]]:
    counted: list[int] = []

    def spy(t: str) -> int:  # the real tokenizer's count, recording the length it was given
        counted.append(len(t))
        return count(t)

    return chunk_units([Unit(text)], spy, TARGET), counted


def test_a_long_single_line_is_never_tokenized_whole(count):
    if not GPL3.is_file():
        pytest.skip(f"{GPL3} missing (Debian's base-files)")
    line = " ".join(GPL3.read_text().split())
    line = " ".join([line] * 4)  # about 140 KB on one line, normal sentences
    chunks, counted = _chunks_and_counted(line, count)
    assert max(counted) <= TARGET * MAX_TOKEN_CHARS < len(line) / 50
    assert " ".join(c.text for c in chunks).split() == line.split()  # nothing lost or moved
    sizes = [count(c.text) for c in chunks]
    assert max(sizes) <= TARGET * 1.25 and sum(sizes) / len(sizes) > TARGET / 2


def test_a_line_without_whitespace_is_cut_at_characters(count):
    blob = base64.b64encode(random.Random(0).randbytes(75_000)).decode()  # 100 KB, no spaces
    chunks, counted = _chunks_and_counted(blob, count)
    assert max(counted) <= TARGET * MAX_TOKEN_CHARS
    assert "".join(c.text for c in chunks).replace(" ", "") == blob
    assert len(chunks) > len(blob) // (TARGET * MAX_TOKEN_CHARS)
    assert max(count(c.text) for c in chunks) <= TARGET * 1.5


def test_windows_cut_at_whitespace_and_keep_every_character():
    text = "alpha beta gamma delta " * 50 + "x" * 300
    parts = windows(text, 64)
    assert all(len(p) <= 64 for p in parts)
    assert "".join(parts).replace(" ", "") == text.replace(" ", "")
    assert all(not p.startswith(" ") and not p.endswith(" ") for p in parts)
    assert all(p.split()[-1] in {"alpha", "beta", "gamma", "delta"} for p in parts[:-6])
