"""A manual's outline in the Library tab: one row per node in document order, each run of
contents or index nodes folded into one row (app/views/folds.py), and the node (or the folded
run's text) a selected row shows."""
from __future__ import annotations

import gradio as gr

from app.library.library_components import LibraryTab
from app.shared.state import ALL, AppState, doc_arg, node_view, picked_id
from app.views.folds import FOLD_MARK, contents_folds, fold_text
from app.views.hover import pages_label
from storage.errors import DocumentNotFound


def outline(s: AppState, t: LibraryTab, doc):
    if doc in (None, "", ALL):
        return {t.outline: [], t.node_head: "", t.node_text: ""}
    try:
        tree = s.tree_of(doc_arg(doc))
    except DocumentNotFound:
        raise gr.Error(f"no manual with id {doc}") from None
    return {t.outline: outline_rows(tree),
            t.node_head: "Select a row of the outline to read that node.", t.node_text: ""}


def outline_rows(tree) -> list[list]:
    """One row per node in document order, each run of contents or index nodes folded into
    one row that says what it holds (app/views/folds.py; its node column: the run's first node)."""
    labels = tree.labels()
    folds = {f.first: f for f in contents_folds(tree)}
    rows, skip = [], set()
    for n in tree.preorder():
        if n.id in skip:
            continue
        indent = "\u00a0\u00a0\u00a0" * n.depth
        fold = folds.get(n.id)
        if fold is not None:
            skip.update(fold.ids)
            rows.append([n.id, indent + FOLD_MARK + fold.title,
                         pages_label(fold.page_start, fold.page_end, tree), fold.tokens, fold.kind])
        else:
            rows.append([n.id, indent + labels[n.id], pages_label(n.page_start, n.page_end, tree),
                         n.tokens, n.kind + (" (OCR)" if tree.is_ocr(n) else "")])
    return rows


def outline_select(s: AppState, t: LibraryTab, doc, evt: gr.SelectData):
    """The selected outline row's node (or a folded run's text), keyed by component."""
    return dict(zip((t.node_head, t.node_text), _selected_node(s, doc, evt)))


def _selected_node(s: AppState, doc, evt: gr.SelectData) -> tuple[str, str]:
    row = evt.row_value or []
    if not row or (doc := picked_id(doc)) is None:
        return "", ""
    if str(row[1]).lstrip("\u00a0").startswith(FOLD_MARK):  # a folded run: all its text
        try:
            tree = s.tree_of(doc)
        except DocumentNotFound:
            return "That manual is not in the library any more.", ""
        fold = next((f for f in contents_folds(tree) if f.first == int(row[0])), None)
        if fold is not None:
            return (f"**{fold.title}**, folded in the outline: a printed "
                    f"{'table of contents' if fold.kind == 'toc' else 'index'}, left out of "
                    f"routing and answers ({len(fold.ids)} nodes from node {fold.first} of "
                    f"manual #{doc})", fold_text(tree, fold))
    return node_view(s, doc, row[0])
