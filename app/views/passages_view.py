"""The passages block of the Ask tab (issue 67): the quote and the two passages after it, each
as readable text in rank order (``engine.answer.shown.card``: the entry's signature first, its
heading and printed page, then its text), right after the answer. A click on a passage opens it
on its page, highlighted (the block's click event carries the passage's rank, ``OPEN_JS``).

When the manual has more than one candidate place (``engine.answer.shown.places``: the second
passage's score close to the quote's, or the quote's low), the first two are shown open (their
whole text, marked "candidate") and the headline says so (app/shared/lines.py); otherwise the
quote is shown whole and the other two in three lines each.
"""
from __future__ import annotations

import html

from engine.answer.shown import cards

# delegated: the block's content is replaced by each answer, the listener stays
OPEN_JS = ("element.addEventListener('click', (e) => { const c = e.target.closest('[data-rank]');"
           " if (c) trigger('click', {rank: Number(c.dataset.rank)}); });")

CSS = """
#passages .passage { border-left: 3px solid var(--border-color-primary); padding: 1px 8px;
  margin: 0 0 4px 0; cursor: pointer; line-height: 1.3; }
#passages .passage:hover { background: var(--background-fill-secondary); }
#passages .passage.open { border-left-color: var(--color-accent); }
#passages .sig { font-family: var(--font-mono); font-weight: 600; overflow-wrap: anywhere; }
#passages .where { color: var(--body-text-color-subdued); font-size: 0.9em; }
#passages .text { white-space: pre-wrap; overflow-wrap: anywhere; }
#passages .passage:not(.open) .text { display: -webkit-box; -webkit-line-clamp: 2;
  -webkit-box-orient: vertical; overflow: hidden; }
#passages .rank { font-weight: 700; }
#passages .tag { font-size: 0.8em; padding: 0 4px; border-radius: 3px;
  background: var(--background-fill-secondary); }
"""


def passages_html(passages: list[dict], open_count: int = 1) -> str:
    """The block's HTML: one card per passage (their JSON, the quote first); the first
    ``open_count`` shown whole. Empty without passages."""
    out = []
    for c in cards(passages):
        is_open = c.rank <= max(1, open_count)
        tag = ("the quote" if c.rank == 1 and open_count <= 1 else
               "candidate" if is_open else "another passage")
        text = "\n".join(c.body)
        out.append(
            f'<div class="passage{" open" if is_open else ""}" data-rank="{c.rank}" '
            f'title="Click to see it highlighted on its page">'
            f'<div class="head"><span class="rank">{c.rank}.</span> '
            + (f'<span class="sig">{html.escape(c.signature)}</span> ' if c.signature else "")
            + f'<span class="where">(<span class="loc">{html.escape(c.where() or "the manual")}'
            f'</span>) <span class="tag">{tag}</span></span></div>'
            + (f'<div class="text">{html.escape(text)}</div>' if text else "") + "</div>")
    return "".join(out)
