"""Token-limit splitting (H2MT 3.1): no node's text exceeds the backbone's per-node budget."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable

from engine.document.chunking import SENTENCE_END
from engine.document.tree import ROOT, Node, TokenCounter, Tree, TreeAssembler

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def split_long_nodes(tree: Tree, encode: TokenCounter, decode: Callable[[list[int]], str],
                     limit: int) -> Tree:
    """Return a new Tree where no node's local text exceeds ``limit`` tokens (H2MT 3.1).

    A too-long node keeps its heading; its body becomes children placed before its existing
    children: one per paragraph (consecutive short paragraphs are packed together up to the
    limit), and a paragraph still too long is cut between its sentences into chunks of at most
    ``limit`` tokens (a sentence longer still: at the limit).
    Token counts are filled in for every node.
    """
    if limit < 8:
        raise ValueError("node_token_limit must be at least 8 tokens")
    asm = TreeAssembler(tree.source, tree.title, tree.pages)
    asm.graph.remove_node(ROOT)
    asm._next = ROOT

    def emit(node: Node, parent: int | None) -> None:
        title_ids = encode(node.title) if node.title else []
        if len(title_ids) > limit // 2:  # a heading alone may not eat the node's budget
            title = decode(title_ids[: limit // 2]).strip()
        else:
            title = node.title
        n_tokens = len(encode(Node(0, None, 0, 0, title, node.text).local_text))
        if n_tokens <= limit:
            nid = asm.add(parent, title=title, text=node.text, page_start=node.page_start,
                          page_end=node.page_end, ref=node.ref, kind=node.kind)
            _set_tokens(asm, nid, n_tokens)
        else:
            nid = asm.add(parent, title=title, text="", page_start=node.page_start,
                          page_end=node.page_end, ref=node.ref, kind=node.kind)
            _set_tokens(asm, nid, len(encode(title)) if title else 0)
            for piece, goes_on in _pieces(node.text, encode, decode, limit):
                cid = asm.add(nid, title="", text=piece, page_start=node.page_start,
                              page_end=node.page_end, kind="chunk" if goes_on else "paragraph")
                _set_tokens(asm, cid, len(encode(asm.node(cid).local_text)))
        for child in tree.children(node.id):
            emit(child, nid)

    emit(tree.root, None)
    out = asm.finish()
    return out


def _set_tokens(asm: TreeAssembler, node_id: int, tokens: int) -> None:
    n = asm.graph.nodes[node_id]["node"]
    asm.graph.nodes[node_id]["node"] = replace(n, tokens=tokens)


def _pieces(text: str, encode: TokenCounter, decode: Callable[[list[int]], str],
            limit: int) -> list[tuple[str, bool]]:
    """Paragraphs packed up to ``limit`` tokens; over-long paragraphs cut into chunks. Each
    piece with whether it goes on from the piece before (a later chunk of a cut paragraph: its
    node's kind is "chunk", the others' "paragraph")."""
    out: list[tuple[str, bool]] = []
    buf: list[str] = []
    buf_tokens = 0

    def cut(para: str, ids: list[int] | None = None) -> None:
        pieces = _sentence_chunks(para, encode, decode, limit) if ids is None else \
            _token_chunks(para, ids, encode, decode, limit)
        out.extend((piece, i > 0) for i, piece in enumerate(pieces))

    for para in (p.strip() for p in _PARAGRAPH_BREAK.split(text)):
        if not para:
            continue
        ids = encode(para)
        if len(ids) > limit:
            if buf:
                out.append(("\n\n".join(buf), False))
                buf, buf_tokens = [], 0
            cut(para)
            continue
        # +2 for the paragraph break joining it to the buffer
        if buf and buf_tokens + len(ids) + 2 > limit:
            out.append(("\n\n".join(buf), False))
            buf, buf_tokens = [], 0
        buf.append(para)
        buf_tokens += len(ids) + (2 if buf_tokens else 0)
    if buf:
        joined = "\n\n".join(buf)
        if len(encode(joined)) > limit:  # tokenisation across the joins can differ slightly
            cut(joined, encode(joined))
        else:
            out.append((joined, False))
    return out


def _sentence_chunks(para: str, encode: TokenCounter, decode: Callable[[list[int]], str],
                     limit: int) -> list[str]:
    """An over-long paragraph cut between its sentences (``chunking.sentences``' ends), as many
    whole sentences a chunk as fit ``limit`` tokens, its text verbatim (line breaks kept); a
    sentence over ``limit`` alone is cut into token chunks."""
    ends = [m.end() for m in SENTENCE_END.finditer(para)] + [len(para)]
    spans, start = [], 0
    for end in ends:
        if para[start:end].strip():
            spans.append((start, end, len(encode(para[start:end].strip()))))
        start = end
    out: list[str] = []
    i = 0
    while i < len(spans):
        a, b, n = spans[i]
        if n > limit:
            piece = para[a:b].strip()
            out.extend(_token_chunks(piece, encode(piece), encode, decode, limit))
            i += 1
            continue
        j = i + 1  # pack the next sentences while the joined text stays within the limit
        while j < len(spans) and n + spans[j][2] + 1 <= limit \
                and len(encode(para[a:spans[j][1]].strip())) <= limit:
            n += spans[j][2] + 1
            j += 1
        out.append(para[a:spans[j - 1][1]].strip())
        i = j
    return out


def _token_chunks(text: str, ids: list[int], encode: TokenCounter,
                  decode: Callable[[list[int]], str], limit: int) -> list[str]:
    """Fixed-length token chunks; re-encoding a decoded chunk can grow it, so shrink until it fits."""
    chunks = []
    start = 0
    while start < len(ids):
        size = limit
        while True:
            piece = decode(ids[start:start + size]).strip()
            if len(encode(piece)) <= limit or size <= 1:
                break
            size -= max(1, size // 16)
        if piece:
            chunks.append(piece)
        start += size
    return chunks
