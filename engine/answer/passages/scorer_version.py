"""Which passage scorer a learned part was fitted on. The answer check reads the quote's score
(one of its signals), so its fit holds for one version of the units (``unit_vectors``) and of
the linear score (``sentences``); ``passage_scorer()`` names that version, the fit writes it
beside its coefficients, and a test fails when the two part ways (refit, then update the file)."""
from __future__ import annotations

import hashlib

from engine.answer.passages import sentences
from engine.answer.passages.unit_vectors import UNITS_VERSION
from engine.settings import Settings

# Raised by hand when the score's code changes in a way its constants below do not show.
SCORE_VERSION = 1


def passage_scorer() -> str:
    """``units <n>, score <n>, <hash of the score's constants>``."""
    constants = (sentences.LEXICAL_WEIGHT, sentences.THRESHOLD, sentences.HEADING_WEIGHT,
                 sentences.TYPE_WEIGHT, sentences.ENCODED, sentences.WINDOW_WORDS,
                 sentences.WINDOW_UNITS)
    if Settings().quote_code_prior:  # the score as shipped (without the prior, the score before)
        constants += (sentences.CODE_WEIGHT,)
    digest = hashlib.sha256(repr(constants).encode()).hexdigest()[:8]
    return f"units {UNITS_VERSION}, score {SCORE_VERSION}, {digest}"
