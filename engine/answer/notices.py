"""The lines the engine writes on an answer for the person reading it (``Answer.warning``):
why a degenerate output is not an answer. The app and the CLI show them as they are; the app's
folded answer names the reason in the same words (``DEGENERATE_REASONS``)."""
from __future__ import annotations


# What ``degeneracy``'s reasons mean, in the words the engine's warnings and the app use.
DEGENERATE_REASONS = {"repeat": "it repeats itself", "markup": "it is markup debris",
                      "empty": "it is empty"}


def degenerate_warning(mode: str, reason: str, fast_path: bool) -> str:
    """The user's line about a degenerate ``mode`` output; ``fast_path``: the memory path (the
    text mode is offered)."""
    if fast_path:
        return (f"The {mode}-mode output is not an answer ({DEGENERATE_REASONS[reason]}): the "
                "fast memory path failed on this question. Ask in text mode for an answer from "
                "the sections' text.")
    if reason == "repeat":
        return ("The answer began repeating itself and was stopped; the repeated part adds "
                "nothing. Check it against the cited sections.")
    return (f"This output is not a usable answer ({DEGENERATE_REASONS[reason]}); read the cited "
            "sections instead.")
