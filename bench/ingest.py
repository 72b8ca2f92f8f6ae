"""Ingest speed: tree building per page, and the memory writer against a plain forward.

    python -m bench.ingest [--docs FILE...] [--write-docs NAME...] [--rounds N] [--text-pages N]

1. Builds the tree of every corpus manual and prints ms per page; then the induced tree (H2MT
   4.3) of a plain-text document of ``--text-pages`` pages without headings (default 300; 0
   skips it), made of real Debian texts: every licence text in /usr/share/common-licenses, then
   systemd's NEWS, cut at a paragraph end after TEXT_PAGE_CHARS characters a page, and its
   routing evidence with the chunk vectors reused. The goal is phase one (tree building, chunk
   vectors and evidence) within 30 s.
2. For the manuals named by --write-docs (default: the two short ones), runs the H2MT memory
   writer and, interleaved in the same process, a plain batched forward of the same backbone
   over the same node texts (tokenizer padding, length-sorted batches of the same size limits,
   decoder stack only). Both are reported in text tokens per second; the last line is
   ``writer/forward throughput ratio: X`` (median over rounds; >= 0.8 is the goal).
"""
from __future__ import annotations

import argparse
import gzip
import statistics
import tempfile
import time
from pathlib import Path

import torch

from engine.memory.backbone import load_backbone
from engine.memory.parts import H2MTParts
from engine.settings import Settings
from engine.document.tree import Tree
from engine.document.build import build_tree
from engine.memory.writer import WriteStats, write_memories

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
# A page of plain text: about what a page of the corpus manuals holds (the ngspice manual's
# 715 pages carry 1.36 M characters of evidence text, 1,900 a page).
TEXT_PAGE_CHARS = 2000
DEBIAN_TEXTS = [Path("/usr/share/common-licenses"), Path("/usr/share/doc/systemd/NEWS.gz")]


def debian_text_book(pages: int, folder: Path) -> Path:
    """A plain-text file of ``pages`` pages without headings, from the Debian texts above."""
    parts = []
    for src in DEBIAN_TEXTS:
        if src.is_dir():
            parts += [p.read_text() for p in sorted(src.iterdir())
                      if p.is_file() and not p.is_symlink()]
        elif src.is_file():
            parts.append(gzip.open(src, "rt").read())
    text = "\n\n".join(parts)
    size = pages * TEXT_PAGE_CHARS
    if len(text) < size:
        raise SystemExit(f"only {len(text)} characters of Debian text found; {size} needed")
    out = folder / f"debian-text-{pages}p.txt"
    out.write_text(text[: text.rfind("\n\n", 0, size)])
    return out


@torch.no_grad()
def plain_forward(tree: Tree, backbone, max_nodes: int, max_tokens: int) -> int:
    """A plain batched forward over the nodes' local texts; returns the text tokens run."""
    texts = [n.local_text for n in tree.preorder() if n.local_text.strip()]
    encoded = sorted((backbone.encode(t) for t in texts), key=len, reverse=True)
    body = backbone.model.get_decoder()
    tokens = 0
    i = 0
    while i < len(encoded):
        width = len(encoded[i])
        j = i
        while j < len(encoded) and j - i < max_nodes and width * (j - i + 1) <= max_tokens:
            j += 1
        j = max(j, i + 1)
        batch = backbone.tokenizer.pad({"input_ids": encoded[i:j]}, padding=True,
                                       return_tensors="pt")
        body(input_ids=batch["input_ids"].to(backbone.device),
             attention_mask=batch["attention_mask"].to(backbone.device), use_cache=False)
        tokens += int(batch["attention_mask"].sum())
        i = j
    return tokens


def induced_tree_timing(pages: int, backbone, settings: Settings) -> None:
    """Phase one of a ``pages``-page plain text: its induced tree, then its routing evidence
    with the chunks' vectors shared (``engine.ingest.SharedVectors``: the tree's chunk vectors
    are the leaves' dense evidence). The sentence encoder is loaded beforehand: its load is
    start-up, not indexing."""
    from engine.ingest import SharedVectors
    from engine.routing.dense import load_encoder
    from engine.routing.evidence import compute_evidence

    encoder = load_encoder(settings.device)
    shared = SharedVectors(encoder)
    with tempfile.TemporaryDirectory() as tmp:
        path = debian_text_book(pages, Path(tmp))
        chars = len(path.read_text())
        embed_s = 0.0

        def embed(texts):
            nonlocal embed_s
            t = time.perf_counter()
            out = shared.embed(texts)
            embed_s += time.perf_counter() - t
            return out

        t0 = time.perf_counter()
        tree = build_tree(path, backbone.encode, backbone.decode, settings.node_token_limit,
                          embed=embed)
        s = time.perf_counter() - t0
        encoded = len(shared.vectors)
        t1 = time.perf_counter()
        compute_evidence(tree, shared.for_evidence(tree))
        ev_s = time.perf_counter() - t1
    leaves = len(tree.leaves())
    print(f"\nplain text without headings: {pages} pages ({chars} characters, Debian licences + "
          f"systemd NEWS)\n  source {tree.source}, {len(tree)} nodes, {leaves} chunks, depth "
          f"{tree.depth}; induced tree built in {s:.1f} s ({s * 1e3 / pages:.0f} ms/page): "
          f"chunk vectors {embed_s:.1f} s ({leaves / embed_s:.1f} chunks/s), the rest "
          f"(chunking, clustering, titles, splitting) {s - embed_s:.1f} s\n  routing evidence "
          f"{ev_s:.1f} s ({len(shared.vectors) - encoded} texts encoded, the {encoded} chunk "
          f"vectors reused); phase one {s + ev_s:.1f} s (goal <= 30 s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", nargs="*", type=Path, help="files for the tree timing (default: corpus PDFs)")
    ap.add_argument("--write-docs", nargs="*", default=["etoolbox-manual.pdf", "camlidl-manual_no-outline.pdf"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--text-pages", type=int, default=300,
                    help="pages of the plain-text document for the induced tree (0: skip)")
    args = ap.parse_args()
    settings = Settings.from_env()
    torch.manual_seed(0)
    backbone = load_backbone(settings)
    print(f"backbone {backbone.name} on {backbone.device} ({backbone.dtype}), "
          f"torch threads {torch.get_num_threads()}")

    docs = args.docs or sorted(CORPUS.glob("*.pdf"))
    trees: dict[str, Tree] = {}
    print(f"\n{'document':36} {'pages':>5} {'nodes':>6} {'depth':>5} {'tree ms':>9} {'ms/page':>8}")
    for path in docs:
        t0 = time.perf_counter()
        tree = build_tree(path, backbone.encode, backbone.decode, settings.node_token_limit)
        ms = (time.perf_counter() - t0) * 1e3
        trees[path.name] = tree
        print(f"{path.name:36} {tree.pages:5d} {len(tree):6d} {tree.depth:5d} {ms:9.0f} "
              f"{ms / max(tree.pages, 1):8.1f}")
    if args.text_pages:
        induced_tree_timing(args.text_pages, backbone, settings)

    parts = H2MTParts(backbone.hidden_size, settings.aggregation).init_from_backbone(backbone)
    parts = parts.to(backbone.device).eval()
    nodes, tok_max = settings.write_batch_nodes, settings.write_batch_tokens
    ratios = []
    print(f"\n{'document':36} {'round':>5} {'writer tok/s':>13} {'forward tok/s':>14} {'ratio':>6} {'writer s':>9}")
    for name in args.write_docs:
        tree = trees.get(name) or build_tree(CORPUS / name, backbone.encode, backbone.decode,
                                             settings.node_token_limit)
        text_tokens = sum(len(backbone.encode(n.local_text)) for n in tree.preorder()
                          if n.local_text.strip())
        for r in range(args.rounds):
            t0 = time.perf_counter()
            write_memories(tree, backbone, parts, max_batch_nodes=nodes, max_batch_tokens=tok_max,
                           stats=WriteStats())
            writer_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            fwd_tokens = plain_forward(tree, backbone, nodes, tok_max)
            forward_s = time.perf_counter() - t0
            w, f = text_tokens / writer_s, fwd_tokens / forward_s
            ratios.append(w / f)
            print(f"{name:36} {r:5d} {w:13.0f} {f:14.0f} {w / f:6.2f} {writer_s:9.1f}")
    if ratios:
        print(f"\nwriter/forward throughput ratio: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
