"""Start the manual explorer in the browser (also the entry of a Hugging Face Space).

Everything is served locally: Gradio's own assets (its default theme uses bundled fonts) and
the plotly.js bundled with Gradio's plot component; nothing loads from a CDN.
"""
from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from app.ui import build_app  # noqa: E402
from engine.runtime import Runtime  # noqa: E402
from engine.settings import Settings  # noqa: E402


def main() -> None:
    settings = Settings.from_env()
    rt = Runtime.load(settings)
    demo = build_app(rt)
    demo.queue(default_concurrency_limit=4).launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
        max_file_size=f"{settings.max_upload_mb:g}mb", ssr_mode=False)


if __name__ == "__main__":
    main()
