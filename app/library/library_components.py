"""The Library tab's components as plain data (``LibraryTab``) and what its handlers update
beyond the tab (``Outside``), built by app/library/library_tab.py and read by its handlers
(there and in app/library/outline.py), which import this module, not the layout."""
from __future__ import annotations

from dataclasses import dataclass, field

import gradio as gr


@dataclass
class Outside:
    """What the tab's handlers update outside the tab: the three manual pickers (library, ask,
    compare; the first is the tab's own ``doc``), the Ask tab's memory line and the timer's
    last-seen key (``poll``'s first input)."""
    pickers: list
    ask_mem_line: gr.Markdown
    poll_key: gr.State


@dataclass
class LibraryTab:
    """The Library tab's components; ``outside``: what its handlers update beyond them, given
    by the page (``wire``)."""
    files: gr.File
    status: gr.Textbox
    mem_line: gr.Markdown
    table: gr.Dataframe
    doc: gr.Dropdown
    delete_btn: gr.Button
    confirm_row: gr.Row  # "Delete manual #N ...?" with its two buttons, shown by delete_btn
    confirm_line: gr.Markdown
    confirm_btn: gr.Button  # deletes (the /delete_manual endpoint)
    cancel_btn: gr.Button
    outline: gr.Dataframe
    node_head: gr.Markdown
    node_text: gr.Textbox
    tab: gr.Tab
    wrong: gr.Dataframe  # the chosen manual's answers marked wrong (app/views/feedback.py)
    outside: Outside | None = field(default=None)

    @property
    def poll_outputs(self) -> list:
        """``poll``'s outputs: the library rows, its memory line, the Ask tab's, the key."""
        return [self.table, self.mem_line, self.outside.ask_mem_line, self.outside.poll_key]

    @property
    def listing_outputs(self) -> list:
        """``refresh``'s outputs (/library): the rows and the three pickers."""
        return [self.table, *self.outside.pickers]
