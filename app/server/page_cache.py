"""A bound on the rendered pages the server keeps on disk (issue 44).

A page view hands Gradio a PIL image, which Gradio writes into its file cache
(``GRADIO_TEMP_DIR``, one ``<content hash>/image.<ext>`` folder per distinct image) for the
browser to fetch, and never removes while the server runs. ``prune_rendered_pages`` keeps the
``keep`` most recent of those files and removes the rest (with their folders), leaving alone
any younger than ``min_age_s`` (a browser may still be fetching it) and every other file of the
cache (uploads). An old answer's page view then shows no image until its section is selected
again. Written by hand because Gradio's own ``delete_cache`` removes by age only: a busy server
would still fill its disk within the age.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

log = logging.getLogger(__name__)

RENDERED_NAMES = ("image.webp", "image.png")  # Gradio's names for a PIL image it caches
MIN_AGE_S = 120.0


def prune_rendered_pages(folder: str | Path, keep: int, min_age_s: float = MIN_AGE_S) -> int:
    """Remove all but the ``keep`` newest rendered page files under ``folder``; how many."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    files = []
    for name in RENDERED_NAMES:
        for f in folder.glob(f"*/{name}"):
            try:
                files.append((f.stat().st_mtime, f))
            except OSError:  # removed meanwhile
                continue
    files.sort(reverse=True)
    now, removed = time.time(), 0
    for mtime, f in files[keep:]:
        if now - mtime < min_age_s:
            continue
        try:
            f.unlink()
            f.parent.rmdir()  # its hash folder, when nothing else is in it
        except OSError:
            pass
        removed += 1
    if removed:
        log.debug("removed %d rendered page images from %s", removed, folder)
    return removed
