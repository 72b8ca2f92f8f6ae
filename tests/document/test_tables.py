"""Tables kept as tables (one row a line, cells separated by " | "): PDF tables found by
``Page.find_tables`` (where a page plausibly holds one), HTML and Markdown tables; a question
answered by one row of an option table is quoted as that row with its header."""
from __future__ import annotations

import pymupdf

from engine.answer.passages.units import split_units
from engine.document.builders.markup import build_html_tree, build_markdown_tree
from engine.document.builders.pdf_pages import join_lines, read_lines
from engine.document.builders.pdf_tables import plausible_table

HEADER = "Parameter | Meaning | Default"
ROW = "buttonStyle | the checkbox style (see below) | 'check'"


def checkbox_pages(shared_dir, tmp_path):
    """reportlab's user guide, pages 59-61 (its checkbox parameter table is on page 60)."""
    doc = pymupdf.open(shared_dir / "corpus" / "reportlab-userguide.pdf")
    doc.select([58, 59, 60])
    out = tmp_path / "reportlab-checkbox.pdf"
    doc.save(out)
    return out


def test_a_pdf_table_becomes_rows(shared_dir, tmp_path):
    doc = pymupdf.open(checkbox_pages(shared_dir, tmp_path))
    text = join_lines(read_lines(doc)[1])
    table = next(p for p in text.split("\n\n") if p.startswith(HEADER))
    assert ROW in table.splitlines()
    assert table.splitlines()[1] == "name | the parameter's name | None"
    units = [u for u in split_units(table) if u.kind == "row"]
    assert f"{HEADER}\n{ROW}" in [u.text for u in units]
    # the pre-check: no grid on etoolbox's pages (no find_tables there)
    etoolbox = pymupdf.open(shared_dir / "corpus" / "etoolbox-manual.pdf")
    assert not any(plausible_table(p) for p in etoolbox)


def test_markdown_and_html_tables_become_rows():
    md = build_markdown_tree("# Options\n\n| Option | Default |\n|---|---|\n| size | 20 |\n"
                             "| colour | red |\n", "m")
    assert md.node(1).text == "Option | Default\nsize | 20\ncolour | red"
    html = build_html_tree("<h1>Options</h1><table><tr><th>Option</th><th>Default</th></tr>"
                           "<tr><td>size</td><td><b>20</b> pt</td></tr></table>", "h")
    assert html.node(1).text == "Option | Default\nsize | 20 pt"
    assert [u.text for u in split_units(md.node(1).text)] == [
        "Option | Default\nsize | 20", "Option | Default\ncolour | red"]


def test_an_option_table_row_is_quoted_with_its_header(tiny_backbone, shared_dir, tmp_path):
    """reportlab-userguide, "Checkbox Usage": the buttonStyle row of the checkbox parameters."""
    from app.views.answer_view import quote_lines
    from app.views.pages import render_pdf
    from engine.ask import AskOptions, ask
    from engine.ingest import ingest_file
    from tests.support.runtime import make_runtime

    rt = make_runtime(tiny_backbone, tmp_path)
    pdf = checkbox_pages(shared_dir, tmp_path)
    doc = ingest_file(pdf, rt, memories=False).doc_id
    ans = ask(rt, doc, "What is the default buttonStyle of a checkbox?",
              AskOptions(mode="quote", k=2), log=False)
    assert ans.quote is not None and ans.quote.text == f"{HEADER}\n{ROW}"
    view = render_pdf(pdf.read_bytes(), quote_lines(ans.quote), ans.quote.page, ans.quote.page)
    assert all(p.found for p in view.placements)  # the row and its header, highlighted
