"""Markdown, HTML and plain-text builders on small files written here."""
from __future__ import annotations

from engine.document.builders import build_raw_tree


def _shape(tree):
    return [(n.depth, n.title) for n in tree.preorder()][1:]


def test_markdown_levels_code_fences_and_jumps(tmp_path):
    path = tmp_path / "guide.md"
    path.write_text("Intro line.\n\n# Install\nGet it.\n\n```sh\n# not a heading\n```\n\n"
                    "## From source\nBuild it.\n\n#### Deep\nJumped two levels.\n\n"
                    "Setext Title\n============\nBody.\n", encoding="utf-8")
    tree = build_raw_tree(path)
    assert tree.source == "markdown" and tree.title == "guide"
    assert tree.root.text == "Intro line."
    assert _shape(tree) == [(1, "Install"), (2, "From source"), (3, "Deep"), (1, "Setext Title")]
    install = tree.children(0)[0]
    assert "# not a heading" in install.text and install.text.startswith("Get it.")


def test_html_headings_and_body(tmp_path):
    path = tmp_path / "page.html"
    path.write_text("<html><head><title>Doc</title><style>p{}</style></head><body>"
                    "<p>Before.</p><h1>One</h1><p>First <b>para</b>.</p><script>x=1</script>"
                    "<h2>Two</h2><ul><li>a</li><li>b</li></ul><h3>Three</h3><pre>code\n  x</pre>"
                    "<h1>Four</h1><table><tr><td>cell</td></tr></table></body></html>",
                    encoding="utf-8")
    tree = build_raw_tree(path)
    assert tree.source == "html" and tree.title == "Doc"
    assert _shape(tree) == [(1, "One"), (2, "Two"), (3, "Three"), (1, "Four")]
    one, four = tree.children(0)
    assert tree.root.text == "Before."
    assert one.text == "First para ."
    assert tree.children(one.id)[0].text == "a\n\nb"
    assert "code\n  x" in tree.node(tree.children(tree.children(one.id)[0].id)[0].id).text
    assert four.text == "cell"
    assert all("x=1" not in n.text for n in tree.preorder())


def test_plain_text_paragraphs(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("First para\nline two.\n\n\nSecond.\r\n\r\nThird.", encoding="utf-8")
    tree = build_raw_tree(path)
    assert tree.source == "text"
    assert [n.text for n in tree.children(0)] == ["First para\nline two.", "Second.", "Third."]
    assert {n.kind for n in tree.children(0)} == {"paragraph"}


def test_extensionless_text_file(tmp_path):
    path = tmp_path / "README"
    path.write_text("Just text.", encoding="utf-8")
    assert build_raw_tree(path).source == "text"
