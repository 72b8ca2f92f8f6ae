"""Tree of the ORD-QA OpenROAD documentation JSON (arXiv:2407.15353's corpus format).

root -> one node per source page -> one node per chunk (``ref`` = the chunk id, e.g.
``global_routing_6``) -> the chunk's own sub-headings. Heading levels are not consistent across
chunks or pages, so only the source -> chunk levels are taken from the file's structure; inside a
chunk, headings nest by their relative level under the chunk.
"""
from __future__ import annotations

import json

from engine.document.builders.markup import Section, markdown_sections, nest
from engine.document.tree import DocumentError, Tree, TreeAssembler

ID_PREFIX = "id:"


def is_ordqa(data: object) -> bool:
    """A list of objects each with "source" (str) and "knowledge" (list of chunk objects)."""
    return (isinstance(data, list) and bool(data)
            and all(isinstance(s, dict) and isinstance(s.get("source"), str)
                    and isinstance(s.get("knowledge"), list) for s in data))


def build_ordqa_tree(text: str, title: str, name: str) -> Tree:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"{name} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not is_ordqa(data):
        raise DocumentError(f"{name}: unsupported JSON; only the ORD-QA documentation format "
                            "(a list of {\"source\", \"knowledge\"} objects) is supported")
    asm = TreeAssembler("json", title)
    for source in data:
        sid = asm.add(0, title=source["source"])
        for i, chunk in enumerate(source["knowledge"]):
            if not isinstance(chunk, dict) or not isinstance(chunk.get("content"), str):
                raise DocumentError(f"{name}: chunk {i} of source {source['source']!r} has no "
                                    "text content")
            ref = chunk.get("id") or f"{source['source']}_{i}"
            add_chunk(asm, sid, str(ref), chunk["content"])
    return asm.finish()


def add_chunk(asm: TreeAssembler, parent: int, ref: str, content: str) -> int:
    """One chunk node titled by its first non-breadcrumb heading; later headings its children."""
    body = _strip_id_line(content)
    preamble, sections = markdown_sections(body)
    crumbs = _breadcrumb_count(sections)
    if sections:
        title_section = sections[crumbs]
        # Breadcrumb headings (page title, parent heading) stay in the chunk text as context.
        lead = [preamble] + [f"{'#' * s.level} {s.title}" for s in sections[:crumbs]]
        text = "\n\n".join(t for t in lead + [title_section.text] if t)
        children = sections[crumbs + 1:]
    else:
        title_section, text, children = None, preamble, []
    cid = asm.add(parent, title=title_section.title if title_section else ref, text=text,
                  ref=ref, kind="chunk")
    nest(asm, cid, children)
    return cid


def _strip_id_line(content: str) -> str:
    first, _, rest = content.partition("\n")
    return rest if first.startswith(ID_PREFIX) else content


def _breadcrumb_count(sections: list[Section]) -> int:
    """Leading headings with no text of their own, each followed by a deeper one (e.g.
    "# Installing OpenROAD" then "### Build Manually"): the last of that run is the title."""
    k = 0
    while (k + 1 < len(sections) and not sections[k].text
           and sections[k + 1].level > sections[k].level):
        k += 1
    return k
