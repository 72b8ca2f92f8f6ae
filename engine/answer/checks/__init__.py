"""Checks of a finished answer: its key terms (``terms``: one ``Term`` type) and what it says that
its sources do not (``check``)."""
