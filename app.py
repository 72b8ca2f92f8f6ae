"""Start the manual explorer in the browser (also the entry of a Hugging Face Space)."""
from __future__ import annotations

import os

from app.ui import build_app
from engine.runtime import Runtime
from engine.settings import Settings


def main() -> None:
    rt = Runtime.load(Settings.from_env())
    demo = build_app(rt)
    demo.queue().launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")))


if __name__ == "__main__":
    main()
