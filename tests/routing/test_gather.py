"""Gathering concurrent calls: one run per group of callers that meet; the question encoders
gathered give every question what it gets alone (to rounding)."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from engine.routing.gather import Gatherer

QUESTIONS = ["How are arrays passed between C and OCaml?", "Why?",
             "What does the camlidl compiler generate from an IDL file?",
             "How do I declare a pointer that may be null?", "Why not?", "How?", "Why?"]


def together(fn, items):
    """fn(item) for every item, each in its own thread, started at once; results in order."""
    out: list = [None] * len(items)
    start = threading.Barrier(len(items))

    def call(i):
        start.wait()
        try:
            out[i] = fn(items[i])
        except Exception as e:  # handed back to the test
            out[i] = e

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(items))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_callers_that_meet_share_a_run_per_group_and_errors_reach_their_group():
    runs = []

    def run(items):
        runs.append(list(items))
        if "bad" in items:
            raise ValueError("bad item")
        return [s.upper() for s in items]

    g = Gatherer(run, key=len, window_s=0.3)
    items = ["ab", "cd", "ab", "xyz", "bad", "efg"]
    out = together(g, items)
    assert out[:3] == ["AB", "CD", "AB"]
    assert all(isinstance(o, ValueError) for o in out[3:])  # the group of "bad", length 3
    assert g.rounds == 1
    assert sorted(map(sorted, runs)) == [["ab", "cd"], ["bad", "efg", "xyz"]]  # "ab" once
    assert g("q") == "Q" and g.rounds == 2  # a caller alone runs alone


def test_minilm_questions_gathered_equal_each_alone():
    from engine.routing.dense import load_encoder

    enc = load_encoder("cpu")
    alone = [enc.encode([q])[0] for q in QUESTIONS]
    gathered = together(enc.encode_query, QUESTIONS)
    for a, b in zip(alone, gathered):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    assert not enc.encode_query("  ").any()


@pytest.mark.parametrize("fraction", [0.5, 1.0])
def test_query_vectors_gathered_equal_each_alone(tiny_backbone, tiny_parts, fraction):
    from engine.routing.query import gathered_query_vector, query_vector

    alone = [query_vector(q, tiny_backbone, tiny_parts, fraction) for q in QUESTIONS]
    gathered = together(lambda q: gathered_query_vector(q, tiny_backbone, tiny_parts, fraction),
                        QUESTIONS)
    for a, b in zip(alone, gathered):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)  # as test_query_vector allows
