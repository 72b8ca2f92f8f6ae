"""A document format is one builder and one row of ``engine.document.builders.FORMATS``: a toy
format added that way is built into a tree, ingested and stored with its media type."""
from __future__ import annotations

from pathlib import Path

from engine.document import builders
from engine.document.builders import FORMATS, Format, build_raw_tree
from engine.document.tree import Tree
from engine.ingest import source_file


def build_toy_tree(text: str, title: str, _file_name: str) -> Tree:
    """The toy format: one section per line "heading = text"."""
    md = "\n\n".join(f"## {h.strip()}\n\n{body.strip()}"
                     for h, body in (line.split("=", 1) for line in text.splitlines() if "=" in line))
    return FORMATS[".md"].build(f"# {title}\n\n{md}", title, _file_name)


def test_a_new_format_is_one_builder_and_one_row(tmp_path, monkeypatch):
    monkeypatch.setitem(FORMATS, ".toy", Format("toy", "text/x-toy", build_toy_tree))
    path = tmp_path / "valves.toy"
    path.write_text("Bleeding = Turn the bleed screw a quarter turn.\n"
                    "Seals = Shut the supply and fit the new seal.\n")
    tree = build_raw_tree(path)
    titles = [n.title for n in tree.preorder()]
    assert "Bleeding" in titles and "Seals" in titles
    assert any("quarter turn" in n.text for n in tree.preorder())
    assert source_file(path).media_type == "text/x-toy"


def test_every_extension_a_user_may_upload_has_a_builder():
    assert builders.FILE_EXTENSIONS[0] == ".pdf"
    assert all(ext in FORMATS for ext in builders.FILE_EXTENSIONS[1:])
    assert builders.media_type(Path("x.md"), b"# x") == "text/markdown"
    assert builders.media_type(Path("x.md"), b"%PDF-1.7 ...") == "application/pdf"  # by header
