"""The Library tab: upload manuals, see the library (with how far each one's memories are), read
a manual's outline node by node, delete a manual.

Indexing in two phases (engine/ingest.py): an upload runs phase one only (tree and routing
evidence, stored in one transaction), so the manual can be asked in text and route modes as soon
as the upload returns; phase two (the node memories) is queued on the background memory writer
(app/shared/memory_writer.py). The library shows "memories n/N" while a document waits or is written
(``poll``, on a timer: one listing and one COUNT per document still being written) and "ready"
once done. Before the memories, the passage vectors the quote reads are encoded in the
background (engine/passage_worker.py): the upload's status says the manual is ready to ask and
how many passages are prepared, and the line under the status follows them ("#3 ready to ask;
preparing passages 3,000/15,590").

Bad input: every file is checked (app/shared/uploads.py, the engine's limits from Settings) and then
built by the engine; whatever is wrong with it comes back as one line in the indexing status, and
nothing of it is stored.
"""
from __future__ import annotations

import logging
from pathlib import Path

import gradio as gr

from app.library.library_components import LibraryTab, Outside
from app.library.outline import outline, outline_select
from app.shared import lines
from app.shared.binding import bind
from app.shared.memory_lines import doc_memory_line, memories_line
from app.shared.state import (ALL, AppState, doc_arg, doc_choices, md_text, node_view, picked_id,
                              pickers)
from app.shared.uploads import ALLOWED_EXTS, UploadRejected, check_upload
from app.shared.user_errors import internal_error, storage_fault, user_error
from app.views import feedback
from engine.document.tree import DocumentError
from engine.ingest import ingest_file
from storage.errors import DocumentNotFound, StorageError
from storage.faults import classify

log = logging.getLogger(__name__)

LIBRARY_COLUMNS = ["id", "title", "file", "pages", "nodes", "depth", "tree source", "memories",
                   "ingest s", "added (UTC)"]
OUTLINE_COLUMNS = ["node", "title", "pages", "tokens", "kind"]


# -- handlers ------------------------------------------------------------------------------------

def library_line(labels: dict[int, str]) -> str:
    """The Library tab's line about memories not ready (empty when none)."""
    return memories_line(labels, "These manuals can be asked now in text and route modes; "
                                 "memory mode, the flat baseline and finding sections by their "
                                 "memories wait for them.")


def ready_line(s: AppState, doc_id: int) -> str:
    """The upload's words on when the manual can be asked: at once, and how far its passage
    vectors are (engine/passage_worker.py; queued here)."""
    try:
        done, total = s.writer.passages.submit(doc_id)
    except Exception as e:  # noqa: BLE001 - a storage fault only (a bug is raised)
        if classify(e) is None:
            raise
        log.warning("queueing the passage vectors of #%d: %s", doc_id, classify(e))
        return lines.READY_TO_ASK  # the count is a nicety; asks encode what they need
    if done >= total:  # every passage stored (or no sentence encoder: none to store)
        return lines.READY_TO_ASK
    said = lines.preparing_passages(done, total, s.writer.passages.words_only(doc_id))
    return (said[:1].upper() + said[1:] + " in the background (progress "
            f"below the library; {lines.SLOWER_MEANWHILE}).")


def passages_line(s: AppState, docs) -> str:
    """The Library tab's line about passage vectors still being prepared (empty when none)."""
    parts = []
    for d in docs:
        st = s.writer.passages.state(d.id)
        if st is not None:
            words = s.writer.passages.words_only(d.id)
            parts.append(f"#{d.id} {lines.preparing_passages(*st, words)}")
    return ("; ".join(parts) + f" ({lines.SLOWER_MEANWHILE}).") if parts else ""


def library_rows(s: AppState, docs=None, labels: dict[int, str] | None = None) -> list[list]:
    docs = s.rt.library.list_documents() if docs is None else docs
    labels = {d.id: s.memory_label(d) for d in docs} if labels is None else labels
    return [[d.id, d.title, d.file_name, d.pages, d.n_nodes, d.depth, d.tree_source,
             labels[d.id], round((d.tree_ms + d.memory_ms) / 1e3, 1),
             d.created_at.strftime("%Y-%m-%d %H:%M")]
            for d in docs]


def poll(s: AppState, t: LibraryTab, prev_key, ask_doc_value):
    """Timer tick: the library rows and memory lines, or nothing when unchanged (one
    listing and one COUNT per document still being written), keyed by component
    (``t.poll_outputs``). A storage fault (the database gone meanwhile) is said once in the
    memory line, the rows left as shown, not a toast a tick."""
    unchanged = {c: gr.skip() for c in t.poll_outputs}
    try:
        docs = s.rt.library.list_documents()
        labels = {d.id: s.memory_label(d) for d in docs}
    except Exception as e:  # noqa: BLE001 - a bug is raised below
        if (fault := classify(e)) is None:
            raise
        line = f"**{fault.line('Listing the library')}**"
        key = repr(line)
        return unchanged if key == prev_key else {**unchanged, t.mem_line: line,
                                                  t.outside.poll_key: key}
    rows = library_rows(s, docs, labels)
    lib_line = " ".join(x for x in (passages_line(s, docs), library_line(labels)) if x)
    ask_line = doc_memory_line(s, ask_doc_value, labels)
    key = repr((rows, lib_line, ask_line))
    if key == prev_key:
        return unchanged
    return {t.table: rows, t.mem_line: lib_line, t.outside.ask_mem_line: ask_line,
            t.outside.poll_key: key}


def picker_updates(s: AppState, t: LibraryTab, value: str | None) -> dict:
    """The three manual pickers' updates (``pickers``), keyed by component."""
    return dict(zip(t.outside.pickers, pickers(s, value)))


def upload(s: AppState, t: LibraryTab, files, progress=gr.Progress(), *,
           user: str | None = None):
    s.require_admin(user, "upload manuals")
    settings, rt = s.settings, s.rt
    paths = [Path(f) for f in (files or [])]
    if len(paths) > settings.max_upload_files:
        raise user_error(f"{len(paths)} files at once; the limit is {settings.max_upload_files} "
                         "an upload (H2MT_MAX_UPLOAD_FILES): upload them in smaller groups. "
                         "Nothing was indexed.")
    messages, last = [], None
    n = len(paths)
    for i, path in enumerate(paths):
        name = path.name
        try:
            check_upload(path, settings)
        except UploadRejected as e:
            messages.append(f"✗ {e}")
            continue

        def report(done: int, total: int, *, stage: str, i=i, name=name) -> None:
            progress((i + 0.1 + 0.85 * done / max(total, 1)) / n,
                     desc=f"{of}{name}: {stage} {done}/{total} "
                          f"{'pages' if stage == 'ocr' else 'nodes'}")

        of = f"file {i + 1} of {n}: " if n > 1 else ""
        progress(i / n, desc=f"{of}{name}: parsing and building the tree")
        try:
            r = ingest_file(path, rt, report, timeout_s=settings.request_timeout_s,
                            memories=False, preflighted=True,  # check_upload ran preflight
                            background=True)
        except DocumentError as e:
            msg = str(e)
            messages.append(f"✗ {msg if msg.startswith(name) else f'{name}: {msg}'}")
            continue
        except Exception as e:  # noqa: BLE001 - one file's failure: one line, the others go on
            if (fault := classify(e)) is not None:  # the storage's fault, named
                messages.append(f"✗ {name}: {storage_fault('Storing it', fault, e)}")
            elif isinstance(e, StorageError):
                messages.append(f"✗ {name}: not stored ({e})")
            else:  # a bug, not the user's file: say so, keep the other files
                messages.append(f"✗ {name}: {internal_error('Indexing')} Nothing was stored.")
            continue
        progress((i + 1) / n, desc=f"{name}: stored")
        if not r.reused:
            s.forget(r.doc_id)
        last = str(r.doc_id)
        verb = "already in the library" if r.reused else "indexed"
        line = (f"✓ {name} {verb} as #{r.doc_id}: {r.nodes} nodes ({r.leaves} leaves), "
                f"depth {r.depth}, {r.pages} pages, tree from {r.source}")
        if not r.reused:
            line += f" (tree {r.tree_ms / 1e3:.1f} s, evidence {r.evidence_ms / 1e3:.1f} s)"
        line += f". {ready_line(s, r.doc_id)}"
        if r.memories == "pending":
            s.writer.submit(r.doc_id)
            line += (" Its memories are being written in the background after that (memory "
                     "mode and finding sections by their memories wait for them).")
        else:
            line += " Memories ready: every mode and router can be used."
        messages.append(line)
    msg = "\n".join(messages) or "No file chosen."
    return {t.status: msg, t.table: library_rows(s), **picker_updates(s, t, last)}


def refresh(s: AppState, t: LibraryTab, current=None):
    return {t.table: library_rows(s), **picker_updates(s, t, current)}


def library_select(s: AppState, t: LibraryTab, evt: gr.SelectData):
    row = evt.row_value or []
    return {t.doc: str(row[0]) if row else gr.update()}


def node_api(s: AppState, doc_id: int, node_id: int) -> tuple[str, str]:
    """A stored node's header (Markdown) and text."""
    return node_view(s, doc_id, node_id)


def confirm_delete(s: AppState, t: LibraryTab, doc):
    """The question before a delete: which manual, and what goes with it."""
    hidden = {t.confirm_row: gr.update(visible=False), t.confirm_line: ""}
    if (doc_id := picked_id(doc)) is None:
        return hidden
    try:
        d = s.rt.library.get_document(doc_id)
    except DocumentNotFound:
        return hidden
    return {t.confirm_row: gr.update(visible=True),
            t.confirm_line: f"**Delete manual #{d.id} {md_text(d.title)}?** Its tree, memories "
                            "and question history go with it; this cannot be undone."}


def delete(s: AppState, t: LibraryTab, doc, *, user: str | None = None):
    s.require_admin(user, "delete manuals")
    if doc in (None, "", ALL):
        raise gr.Error("Choose a manual to delete.")
    doc = doc_arg(doc)
    try:
        s.rt.library.get_document(doc)
    except DocumentNotFound:
        raise gr.Error(f"no manual with id {doc}") from None
    s.writer.cancel(doc)  # a document is never deleted under its memory writer
    try:
        s.rt.library.delete_document(doc)
    except DocumentNotFound:
        raise gr.Error(f"no manual with id {doc}") from None
    s.forget(doc)
    return {t.status: f"Deleted manual #{doc} (its logged questions stay, without a manual).",
            t.table: library_rows(s), **picker_updates(s, t, None), t.outline: [],
            t.node_head: "", t.node_text: ""}


# -- layout and events ---------------------------------------------------------------------------

def build(s: AppState) -> LibraryTab:
    """The tab's components, inside the caller's ``gr.Tabs``."""
    with gr.Tab("Library", id="library") as tab:
        files = gr.File(file_count="multiple", file_types=list(ALLOWED_EXTS),
                        label=f"Upload manuals (PDF, Markdown, HTML, text; several at "
                              f"once; up to {s.settings.max_upload_mb:g} MB and "
                              f"{s.settings.max_pages} pages each)",
                        elem_id="upload-files")
        status = gr.Textbox(label="Indexing", lines=3, interactive=False,
                            elem_id="index-status")
        mem_line = gr.Markdown(elem_id="memory-status")
        table = gr.Dataframe(headers=LIBRARY_COLUMNS, value=library_rows(s),
                             label="Library (memories: ready, or n/N written so far)",
                             interactive=False, type="array", elem_id="library-table")
        with gr.Row():
            doc = gr.Dropdown(label="Manual", choices=doc_choices(s, False), value=None,
                              scale=4, elem_id="library-doc", allow_custom_value=True)
            delete_btn = gr.Button("Delete this manual", variant="stop", scale=1,
                                   elem_id="delete-button", interactive=False)
        # a delete asks first: the manual, its memories and its questions go for good
        with gr.Row(visible=False, elem_id="delete-confirm-row") as confirm_row:
            confirm_line = gr.Markdown(elem_id="delete-confirm-line")
            confirm_btn = gr.Button("Yes, delete it", variant="stop", scale=0, min_width=140,
                                    elem_id="delete-confirm")
            cancel_btn = gr.Button("Cancel", scale=0, min_width=100, elem_id="delete-cancel")
        with gr.Row():
            with gr.Column(scale=3):
                outline_table = gr.Dataframe(headers=OUTLINE_COLUMNS, label="Outline "
                                             "(select a row to read the node)",
                                             interactive=False, type="array",
                                             max_height=520, elem_id="outline-table",
                                             column_widths=["8%", "55%", "14%", "10%", "13%"])
            with gr.Column(scale=2):
                node_head = gr.Markdown(elem_id="library-node-head")
                node_text = gr.Textbox(label="Node text", lines=18, interactive=False,
                                       elem_id="library-node-text")
        wrong = feedback.build_wrong_list()
    return LibraryTab(files, status, mem_line, table, doc, delete_btn, confirm_row,
                      confirm_line, confirm_btn, cancel_btn, outline_table, node_head,
                      node_text, tab, wrong)


def alone(s: AppState) -> LibraryTab:
    """The tab on a page of its own, unwired (a bench's or a test's calls to its handlers): its
    outside, that page's own Ask and Compare pickers, Ask memory line and timer key."""
    with gr.Blocks():
        with gr.Tabs():
            tab = build(s)
        tab.outside = Outside([tab.doc, gr.Dropdown(allow_custom_value=True),
                               gr.Dropdown(allow_custom_value=True)], gr.Markdown(),
                              gr.State(""))
    return tab


def wire(s: AppState, tab: LibraryTab, outside: Outside, poll_inputs: list) -> None:
    """The tab's events. ``outside``: what its handlers update beyond the tab (kept as
    ``tab.outside``); ``poll_inputs``: those of ``poll``, run once an upload returns."""
    tab.outside = outside
    pickers_out = outside.pickers
    # one progress bar, on the indexing status (not one per output component)
    tab.files.upload(bind(s, upload, tab, on_gpu=True), tab.files,
                     [tab.status, tab.table, *pickers_out], api_name="ingest",
                     concurrency_limit=1, concurrency_id="indexing",
                     show_progress_on=[tab.status]).then(
        bind(s, poll, tab), poll_inputs, tab.poll_outputs, api_visibility="private",
        show_progress="hidden")
    tab.doc.change(bind(s, outline, tab), tab.doc, [tab.outline, tab.node_head, tab.node_text],
                   api_name="outline")
    tab.outline.select(bind(s, outline_select, tab), tab.doc, [tab.node_head, tab.node_text],
                       api_visibility="private")
    tab.table.select(bind(s, library_select, tab), None, tab.doc, api_visibility="private")
    feedback.wire_wrong_list(s, tab.doc, tab.wrong)
    tab.tab.select(bind(s, feedback.wrong_rows), tab.doc, tab.wrong, api_visibility="private",
                   show_progress="hidden")  # verdicts given in the Ask tab meanwhile
    # Delete is live only while a manual is chosen (an empty library has nothing to delete).
    tab.doc.change(lambda d: gr.update(interactive=d not in (None, "")), tab.doc,
                   tab.delete_btn, queue=False, api_visibility="private",
                   show_progress="hidden")
    private = dict(queue=False, api_visibility="private", show_progress="hidden")
    tab.delete_btn.click(bind(s, confirm_delete, tab), tab.doc,
                         [tab.confirm_row, tab.confirm_line], **private)
    tab.cancel_btn.click(lambda: gr.update(visible=False), None, tab.confirm_row, **private)
    tab.confirm_btn.click(lambda: gr.update(visible=False), None, tab.confirm_row, **private)
    tab.confirm_btn.click(bind(s, delete, tab), tab.doc,
                          [tab.status, tab.table, *pickers_out, tab.outline, tab.node_head,
                           tab.node_text], api_name="delete_manual")
