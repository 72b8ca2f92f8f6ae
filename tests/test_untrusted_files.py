"""Untrusted files (issue 44): a huge text without headings is refused within the ingest's
deadline (never held for hours), and the deadline stops every step of building a tree."""
from __future__ import annotations

import random
import time

import pytest

from engine.document.tree import DocumentError
from engine.settings import Settings

WORDS = ("the pump valve motor pressure check open close install manual error filter water "
         "seal gasket impeller").split()


def headingless_text(path, mb: float) -> None:
    """``mb`` megabytes of paragraphs of words, not one heading."""
    rng = random.Random(0)
    with open(path, "w") as f:
        size = 0
        while size < mb * 2**20:
            para = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 120))) + ".\n\n"
            f.write(para)
            size += len(para)


@pytest.fixture(scope="module")
def rt(tiny_backbone, tiny_parts, tmp_path_factory):
    from engine.runtime import Runtime
    from storage import Library

    folder = tmp_path_factory.mktemp("untrusted")
    settings = Settings(data_dir=folder)
    runtime = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    yield runtime
    runtime.library.close()


def test_a_90_mb_text_without_headings_is_refused_within_the_deadline(rt, tmp_path):
    from engine.ingest import ingest_file

    big = tmp_path / "huge.txt"
    headingless_text(big, 90)
    deadline_s = 120.0
    t0 = time.monotonic()
    with pytest.raises(DocumentError) as e:
        ingest_file(big, rt, timeout_s=deadline_s, memories=False)
    took = time.monotonic() - t0
    assert took < deadline_s + 10, took
    assert "huge.txt" in str(e.value) and ("H2MT_MAX_NODES" in str(e.value)
                                           or "longer than" in str(e.value))
    assert rt.library.list_documents() == []  # nothing stored


def test_the_deadline_stops_building_a_tree(rt, tmp_path):
    """A deadline too short for the file stops chunking, encoding or clustering with one line
    naming the file and the step."""
    from engine.ingest import IngestTimeout, ingest_file

    text = tmp_path / "medium.txt"
    headingless_text(text, 0.3)
    with pytest.raises(IngestTimeout, match=r"medium\.txt: indexing took longer than 0\.01 s "
                                            r"\(while (parsing|chunking|encoding|clustering)\)"):
        ingest_file(text, rt, timeout_s=0.01, memories=False)
    assert rt.library.list_documents() == []
