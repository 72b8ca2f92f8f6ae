"""What of the manual goes into an answer's context: the nodes that may (``readable``), the
routed ones in order (``routed_sections``, ``routed_text``: one walk, ``_routed_nodes``), the
signature a cut entry's later chunk goes on from (``entry_lead``), and
numbered blocks of them within a token budget (``pack_blocks``, ``pack_context``), each block in
the one format the reader sees (``block``; ``block_bodies``: a context without its headers)."""
from __future__ import annotations

import re
from typing import Iterator, NamedTuple

from engine.answer.passages.units import signature_lines
from engine.document.matter import LISTING, TITLE_PAGE

# Node kinds put into an answer's context only when the question asks for them
# (document.hygiene marks them at build time; engine.document.matter.asks_for_matter).
CONTEXT_EXCLUDED_KINDS = frozenset({"toc", "index", TITLE_PAGE, LISTING})


def entry_lead(tree, node) -> str:
    """The signature of the definition entry a node's text goes on from, or "": a later chunk
    of a paragraph cut at the node budget (kind "chunk", ``engine.document.split``) whose
    paragraph opens with a signature (``units.signature_lines``) in the chunk it was cut from."""
    if node.kind != "chunk" or node.title or node.parent is None:
        return ""
    siblings = tree.children(node.parent)
    at = next((i for i, s in enumerate(siblings) if s.id == node.id), 0)
    while at > 0 and siblings[at].kind == "chunk":
        at -= 1
    lines = [" ".join(ln.split()) for ln in siblings[at].text.strip().splitlines() if ln.strip()]
    sig = signature_lines(lines) if siblings[at].kind != "chunk" else 0
    return "\n".join(lines[:sig])


def readable(node, with_matter: bool = False) -> bool:
    """Whether a node's text may go into an answer's context: with body text, and not front or
    back matter (a table of contents, an index, a title page, a command summary) unless
    ``with_matter`` (the question asks for it)."""
    return (with_matter or node.kind not in CONTEXT_EXCLUDED_KINDS) and bool(node.text.strip())


class RoutedSection(NamedTuple):
    rid: int  # routed node id
    doc_id: int
    node_id: int
    tree: object  # engine.document.tree.Tree
    node: object  # its node


def _routed_nodes(routing, trees: dict, rids) -> Iterator[tuple[int, int, int, object]]:
    """(rid, doc_id, node_id, tree) of the routed ids ``rids`` in the given order whose
    document's tree is in ``trees``."""
    for rid in rids:
        doc_id, node_id = routing.origin[rid]
        tree = trees.get(doc_id)
        if tree is not None:
            yield rid, doc_id, node_id, tree


def routed_sections(routing, trees: dict, rids,
                    with_matter: bool = False) -> Iterator[RoutedSection]:
    """The ``readable`` nodes among routed ids ``rids`` (in the given order) whose document's
    tree is in ``trees`` (front and back matter too when ``with_matter``)."""
    for rid, doc_id, node_id, tree in _routed_nodes(routing, trees, rids):
        node = tree.node(node_id)
        if readable(node, with_matter):
            yield RoutedSection(rid, doc_id, node_id, tree, node)


def routed_text(routing, trees: dict, rids) -> list[str]:
    """The heading and body of each routed node in ``rids`` and of every node below it
    (``readable`` ones only, each once): what their memories stand for, a parent's memory being
    built from its children's (H2MT 3.2). Memory mode's answer is checked against it."""
    seen: dict[tuple[int, int], str] = {}
    for _, doc_id, node_id, tree in _routed_nodes(routing, trees, rids):
        for i in sorted(tree.subtree_ids(node_id)):
            n = tree.node(i)
            if readable(n):
                seen.setdefault((doc_id, i), n.local_text)
    return list(seen.values())


def heading_path(tree, node_id: int, levels: int = 3) -> str:
    """The node's headings below the manual's title, the last ``levels`` of them, " > "-joined."""
    titles = [n.title.strip() for n in tree.path(node_id)[1:] if n.title.strip()]
    return " > ".join(titles[-levels:])


def block(number: int, heading: str, page: int | None, body: str) -> str:
    """One numbered block of a reader's context: ``[i] heading (p. N):`` and its text below."""
    return f"[{number}] {heading}" + (f" (p. {page})" if page else "") + f":\n{body}"


# ``block``'s header line ("[2] Patching (p. 13):") at the head of each block of a context
BLOCK_HEADER = re.compile(r"^\[\d+\] [^\n]*:$", re.M)


def block_bodies(context: str) -> str:
    """A context of ``block``s less their header lines: the manual's own lines."""
    return BLOCK_HEADER.sub("", context)


def pack_blocks(encode, budget: int, items: list[tuple[object, int]],
                max_blocks: int | None = None) -> tuple[str, list[int]]:
    """Numbered blocks ``[i] heading path (p. N):\\n body`` of (tree, node_id) items, in the
    given order, skipping what would pass ``budget`` tokens and what is not ``readable``, at
    most ``max_blocks`` of them. Returns (context, indices of the items used)."""
    blocks, used, kept = [], 0, []
    for j, (tree, node_id) in enumerate(items):
        if max_blocks is not None and len(kept) >= max_blocks:
            break
        node = tree.node(node_id)
        if not readable(node):
            continue
        text = block(len(kept) + 1, heading_path(tree, node_id) or node.title, node.page_start,
                     node.text.strip())
        n = len(encode(text))
        if used + n > budget:
            continue
        used += n
        kept.append(j)
        blocks.append(text)
    return "\n\n".join(blocks), kept


def pack_context(trees: dict, route, encode, budget: int,
                 max_sections: int | None = None) -> tuple[str, list[int]]:
    """The route's selected nodes' body text within ``budget`` tokens and ``max_sections``
    blocks, numbered, under their heading paths and pages (``pack_blocks``). Order: by the
    fused score of each node's own evidence when the route has one (best first), else deepest
    first (the depths of the routed tree, ``route.tree``). Returns (context text, routed ids
    cited in that order)."""
    routing = route.tree
    if route.pack_scores is not None:
        order = sorted(route.selected, key=lambda i: (-float(route.pack_scores[i]),
                                                      -routing.depth[i], i))
    else:
        order = sorted(route.selected, key=lambda i: (-routing.depth[i], i))
    order = [i for i in order if routing.origin[i][0] in trees]
    items = [(trees[routing.origin[i][0]], routing.origin[i][1]) for i in order]
    text, kept = pack_blocks(encode, budget, items, max_sections)
    return text, [order[j] for j in kept]
