"""Start the manual explorer in the browser (also the entry of a Hugging Face Space); the same
as the ``manual-explorer`` command of an installed package (``app/serve.py``).

Everything is served locally: Gradio's own assets (its default theme uses bundled fonts) and
the plotly.js bundled with Gradio's plot component; nothing loads from a CDN.
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from app.serve import main  # noqa: E402  (options: python app.py --help)

if __name__ == "__main__":
    sys.exit(main())
