"""Start the manual explorer in the browser (also the entry of a Hugging Face Space); the same
as the ``manual-explorer`` command of an installed package (``app/serve.py``).

Everything is served locally: Gradio's own assets (its default theme uses bundled fonts) and
the plotly.js bundled with Gradio's plot component; nothing loads from a CDN.
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
if os.environ.get("SPACE_ID"):
    # A Hugging Face Space listens on 0.0.0.0 and its own visibility setting (public or
    # private) is its gate; a Space's H2MT_AUTH or H2MT_OPEN variable still wins.
    os.environ.setdefault("H2MT_OPEN", "1")

from app.serve import main  # noqa: E402  (options: python app.py --help)

if __name__ == "__main__":
    sys.exit(main())
