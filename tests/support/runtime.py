"""One way to build a runtime in tests (``make_runtime``: a backbone, freshly initialised parts,
a SQLite library in a folder), the sample manual (``MANUAL``: a widget guide in Markdown) and
``tiny_rt``: that manual ingested on the tiny random Llama (a module-scoped fixture)."""
from __future__ import annotations

import pytest

from engine.ingest import ingest_file
from engine.memory.parts import H2MTParts
from engine.runtime import Runtime
from engine.settings import Settings
from storage import Library

MANUAL = """# Widget manual
Widgets are configured with a file called widget.conf.

## Installing
Run the installer and answer the questions. The installer writes widget.conf for you.

## Sizes
### Small widgets
Small widgets fit in one hand and need no power supply.
### Large widgets
Large widgets need a 12 V supply. Never connect them to 230 V.
"""


def make_runtime(backbone, tmp_path):
    settings = Settings(data_dir=tmp_path)
    parts = H2MTParts(backbone.hidden_size, "mean").init_from_backbone(backbone)
    return Runtime(settings, backbone, parts.eval(), Library(settings.database_url))


def widgets_runtime(backbone, tmp_path) -> tuple[Runtime, int]:
    """A runtime in ``tmp_path`` holding the widgets manual (``MANUAL``) with its memories."""
    rt = make_runtime(backbone, tmp_path)
    md = tmp_path / "widgets.md"
    md.write_text(MANUAL)
    return rt, ingest_file(md, rt).doc_id


@pytest.fixture(scope="module")
def tiny_rt(tiny_backbone, tmp_path_factory):
    return widgets_runtime(tiny_backbone, tmp_path_factory.mktemp("tiny"))


def tagged_manual(tag: str) -> str:
    """A small Markdown manual whose every section names ``tag`` (one per document)."""
    return (f"# Manual {tag}\n\nIntro to {tag}.\n\n## Setup\n\nInstall the pump and open the "
            f"valve {tag}.\n\n## Use\n\nStart the motor. Check the pressure of {tag}.\n\n"
            f"### Errors\n\nError {tag} means the valve is closed.\n")
