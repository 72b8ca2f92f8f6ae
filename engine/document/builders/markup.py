"""Trees of markup and plain-text documents (H2MT 3.1 for non-paged sources).

- Markdown: heading tokens from markdown-it-py (so ``#`` lines inside fenced code are not
  headings; setext headings come for free), nested by level.
- HTML: ``h1``..``h6`` nested by level (beautifulsoup4 with the stdlib ``html.parser``), body text
  from the text between headings, one paragraph per block element; a definition list's ``<dd>``
  goes on the line under its ``<dt>`` (one paragraph: the entry); script/style dropped.
- Plain text: one child of the root per paragraph (paragraphs split at blank lines).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from markdown_it import MarkdownIt

from engine.document.tree import Tree, TreeAssembler

HTML_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
# Elements whose text forms its own paragraph.
HTML_BLOCKS = {"p", "li", "pre", "td", "th", "dt", "dd", "blockquote", "caption", "figcaption",
               "div", "section", "article", "main", "header", "footer", "aside", "nav", "table",
               "tr", "ul", "ol", "dl", "body", "html", "address", "summary", "details"}
HTML_DROPPED = ("script", "style", "noscript", "template", "head")


@dataclass(frozen=True)
class Section:
    level: int  # 1..6
    title: str
    text: str  # body until the next heading of any level


def nest(asm: TreeAssembler, parent: int, sections: list[Section], **fields) -> None:
    """Add sections under ``parent``; a heading nests under the nearest shallower heading before
    it, so level jumps (## -> ####) attach to the closest ancestor."""
    stack: list[tuple[int, int]] = [(0, parent)]
    for s in sections:
        while stack[-1][0] >= s.level:
            stack.pop()
        nid = asm.add(stack[-1][1], title=s.title, text=s.text, **fields)
        stack.append((s.level, nid))


# -- Markdown -----------------------------------------------------------------------------------

_md = MarkdownIt("commonmark")


def markdown_sections(text: str) -> tuple[str, list[Section]]:
    """(text before the first heading, headings with their bodies) of a Markdown string."""
    lines = text.splitlines()
    tokens = _md.parse(text)
    found: list[tuple[int, str, int, int]] = []  # level, title, first line, line after heading
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.map is not None and tok.level == 0:
            title = tokens[i + 1].content if i + 1 < len(tokens) else ""
            found.append((int(tok.tag[1]), title, tok.map[0], tok.map[1]))
    preamble_end = found[0][2] if found else len(lines)
    sections = []
    for k, (level, title, _, body_start) in enumerate(found):
        body_end = found[k + 1][2] if k + 1 < len(found) else len(lines)
        sections.append(Section(level, _plain_inline(title),
                                "\n".join(lines[body_start:body_end]).strip()))
    return "\n".join(lines[:preamble_end]).strip(), sections


def _plain_inline(title: str) -> str:
    """Heading text without inline markup marks (``code``, **bold**, [link](url) -> link)."""
    t = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
    return re.sub(r"[*_`]+", "", t).strip() or title.strip()


_MD_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
TABLE_SEPARATOR = " | "


def _md_cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [c.strip() for c in re.split(r"(?<!\\)\|", inner)]


def markdown_tables_as_rows(text: str) -> str:
    """GitHub-style Markdown tables (a header line, a ``---|---`` rule, then rows) as the
    builders write tables: one row a line, cells separated by " | ", the rule left out, a blank
    line around (the table is a paragraph of its own)."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        if (i + 1 < len(lines) and "|" in lines[i] and _MD_RULE.match(lines[i + 1])
                and "|" in lines[i + 1]):
            rows = [lines[i]]
            j = i + 2
            while j < len(lines) and "|" in lines[j] and lines[j].strip():
                rows.append(lines[j])
                j += 1
            out += ["", *(TABLE_SEPARATOR.join(c for c in _md_cells(r)) for r in rows), ""]
            i = j
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def build_markdown_tree(text: str, title: str) -> Tree:
    preamble, sections = markdown_sections(text)
    preamble = markdown_tables_as_rows(preamble)
    sections = [Section(s.level, s.title, markdown_tables_as_rows(s.text).strip())
                for s in sections]
    asm = TreeAssembler("markdown", title, root_text=preamble)
    nest(asm, 0, sections)
    return asm.finish()


# -- HTML ---------------------------------------------------------------------------------------

def build_html_tree(html: str, fallback_title: str) -> Tree:
    from bs4 import BeautifulSoup, Comment, Doctype, Tag
    from bs4.element import NavigableString, ProcessingInstruction

    soup = BeautifulSoup(html, "html.parser")
    title_tag = soup.find("title")
    title = title_tag.get_text(" ", strip=True) if title_tag else ""
    for tag in soup.find_all(HTML_DROPPED):
        tag.decompose()
    _html_tables_as_rows(soup)

    preamble: list[str] = []
    sections: list[tuple[int, str, list[str]]] = []
    current = preamble
    last_block, last_term = None, False
    for el in soup.descendants:
        if isinstance(el, Tag) and el.name in HTML_HEADINGS:
            current = []
            sections.append((int(el.name[1]), el.get_text(" ", strip=True), current))
            last_block, last_term = None, False
            continue
        if not isinstance(el, NavigableString) or isinstance(el, (Comment, Doctype,
                                                                    ProcessingInstruction)):
            continue
        if el.find_parent(HTML_HEADINGS) is not None:
            continue
        piece = str(el)
        block = el.find_parent(lambda t: t.name in HTML_BLOCKS)
        in_pre = el.find_parent("pre") is not None
        if not in_pre:
            piece = " ".join(piece.split())
        if not piece.strip():
            continue
        term = el.find_parent("dt") is not None
        if block is not last_block and last_term and current and _opens_description(block):
            current[-1] = f"{current[-1]}\n{piece}"  # a <dd> under its <dt>: one entry
        elif block is not last_block or not current:
            current.append(piece)
        else:
            current[-1] = f"{current[-1]} {piece}" if not in_pre else current[-1] + piece
        last_block, last_term = block, term

    asm = TreeAssembler("html", title or fallback_title, root_text="\n\n".join(preamble))
    nest(asm, 0, [Section(level, t, "\n\n".join(body)) for level, t, body in sections])
    return asm.finish()


def _opens_description(block) -> bool:
    """Whether a block is a ``<dd>`` (or the first block inside one)."""
    dd = block if block.name == "dd" else block.find_parent("dd")
    return dd is not None and (dd is block or next(iter(dd.find_all(True)), None) is block)


def _html_tables_as_rows(soup) -> None:
    """Each innermost ``table`` replaced by a ``pre`` of its rows, one row a line, cells
    separated by " | " (as the builders write tables), so the walk keeps it as one paragraph."""
    for table in reversed(soup.find_all("table")):
        if table.find("table") is not None:
            continue
        rows = []
        for tr in table.find_all("tr"):
            cells = [" ".join(c.get_text(" ").split()) for c in tr.find_all(["th", "td"])]
            if any(cells):
                rows.append(TABLE_SEPARATOR.join(c for c in cells if c))
        pre = soup.new_tag("pre")
        pre.string = "\n".join(rows)
        table.replace_with(pre)


# -- plain text ---------------------------------------------------------------------------------

_BLANK_LINE = re.compile(r"\n[ \t]*\n")


def build_text_tree(text: str, title: str) -> Tree:
    """Each paragraph a child of the root (no headings to trust in plain text)."""
    asm = TreeAssembler("text", title)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    for para in (p.strip() for p in _BLANK_LINE.split(text)):
        if para:
            asm.add(0, text=para, kind="paragraph")
    return asm.finish()
