"""Minimal library page: upload manuals, watch indexing progress, browse stored outlines.

The full explorer (ask, routing tree, compare) comes with later work; this page already runs the
real ingest pipeline so a user can index manuals in the browser.
"""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from engine.ingest import ingest_file
from engine.runtime import Runtime
from engine.tree import DocumentError

LIBRARY_COLUMNS = ["id", "title", "file", "pages", "nodes", "depth", "source", "ingest s"]


def library_rows(rt: Runtime) -> list[list]:
    return [[d.id, d.title, d.file_name, d.pages, d.n_nodes, d.depth, d.tree_source,
             round((d.tree_ms + d.memory_ms) / 1e3, 1)] for d in rt.library.list_documents()]


def build_app(rt: Runtime) -> gr.Blocks:
    def upload(files, progress=gr.Progress()):
        messages = []
        for f in files or []:
            path = Path(f)
            name = path.name

            def report(done: int, total: int) -> None:
                progress(done / max(total, 1), desc=f"{name}: memory {done}/{total} nodes")

            progress(0, desc=f"{name}: building the tree")
            try:
                r = ingest_file(path, rt, report)
            except DocumentError as e:
                messages.append(f"✗ {name}: {e}")
                continue
            verb = "already in the library" if r.reused else "indexed"
            messages.append(f"✓ {name} {verb}: {r.nodes} nodes, depth {r.depth}, {r.pages} pages "
                            f"(tree {r.tree_ms / 1e3:.1f} s, memories {r.memory_ms / 1e3:.1f} s)")
        return "\n".join(messages) or "No file chosen.", library_rows(rt)

    def outline(doc_id):
        if doc_id is None:
            return ""
        tree = rt.library.get_tree(int(doc_id))
        return tree.outline()

    with gr.Blocks(title="Manual explorer") as demo:
        gr.Markdown("# Manual explorer\nUpload technical manuals (PDF, Markdown, HTML, text); "
                    "each becomes a section tree with one H2MT memory per node.")
        files = gr.File(file_count="multiple", file_types=[".pdf", ".md", ".markdown", ".txt",
                                                          ".html", ".htm", ".json"],
                        label="Manuals")
        status = gr.Textbox(label="Indexing", lines=3, interactive=False)
        table = gr.Dataframe(headers=LIBRARY_COLUMNS, value=library_rows(rt), label="Library",
                             interactive=False)
        doc = gr.Number(label="Document id", precision=0)
        tree_view = gr.Code(label="Outline", language=None, lines=20)
        files.upload(upload, files, [status, table], concurrency_limit=1,
                     concurrency_id="indexing")
        doc.submit(outline, doc, tree_view)
    return demo
