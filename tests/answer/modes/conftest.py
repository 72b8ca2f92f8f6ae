"""One runtime for the mode tests: the widgets manual on a tiny random Llama, with memories."""
from __future__ import annotations

import pytest

from engine.ingest import ingest_file
from tests.support.runtime import MANUAL, make_runtime


@pytest.fixture(scope="package")
def tiny_rt(tiny_backbone, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("modes")
    rt = make_runtime(tiny_backbone, tmp)
    md = tmp / "widgets.md"
    md.write_text(MANUAL)
    return rt, ingest_file(md, rt).doc_id
