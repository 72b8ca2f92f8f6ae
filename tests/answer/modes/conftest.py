"""One runtime for the mode tests: the widgets manual on a tiny random Llama, with memories
(one per package here, where tests/support/runtime.py's ``tiny_rt`` is one per module)."""
from __future__ import annotations

import pytest

from tests.support.runtime import widgets_runtime


@pytest.fixture(scope="package")
def tiny_rt(tiny_backbone, tmp_path_factory):
    return widgets_runtime(tiny_backbone, tmp_path_factory.mktemp("modes"))
