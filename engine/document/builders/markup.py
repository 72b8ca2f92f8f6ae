"""Trees of markup and plain-text documents (H2MT 3.1 for non-paged sources).

- Markdown: heading tokens from markdown-it-py (so ``#`` lines inside fenced code are not
  headings; setext headings come for free), nested by level.
- HTML: ``h1``..``h6`` nested by level (beautifulsoup4 with the stdlib ``html.parser``), body text
  from the text between headings, one paragraph per block element; script/style dropped.
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


def build_markdown_tree(text: str, title: str) -> Tree:
    preamble, sections = markdown_sections(text)
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

    preamble: list[str] = []
    sections: list[tuple[int, str, list[str]]] = []
    current = preamble
    last_block = None
    for el in soup.descendants:
        if isinstance(el, Tag) and el.name in HTML_HEADINGS:
            current = []
            sections.append((int(el.name[1]), el.get_text(" ", strip=True), current))
            last_block = None
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
        if block is not last_block or not current:
            current.append(piece)
        else:
            current[-1] = f"{current[-1]} {piece}" if not in_pre else current[-1] + piece
        last_block = block

    asm = TreeAssembler("html", title or fallback_title, root_text="\n\n".join(preamble))
    nest(asm, 0, [Section(level, t, "\n\n".join(body)) for level, t, body in sections])
    return asm.finish()


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
