"""The browser UI (Gradio); it calls the engine and never the model directly.

One package per tab (``app.ask``, ``app.library``, ``app.compare``, ``app.evaluation``) over
what the tabs share: ``app.shared`` (the app's state and the helpers every tab uses) and
``app.views`` (an answer and its route as the page shows them); ``app.server`` holds what the
served app adds around the page (the MCP tools and their sign-in, the bounds on sessions and on
rendered pages). ``app.ui`` is the page that wires the tabs, ``app.serve`` the
``manual-explorer`` command. A tab's package imports the shared packages, never another tab's
(tests/test_layout.py)."""
