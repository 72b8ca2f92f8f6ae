"""engine.answer.decoding: a plan decoded whole or streamed gives the same text; limits stop it."""
from __future__ import annotations

from engine.answer.decoding import Decoding, Streamed, run_plan, stripped
from engine.answer.prompts import text_plan


def test_streamed_chunks_join_to_the_decoded_text(tiny_backbone):
    plan = text_plan(tiny_backbone, "How do I power a large widget?", "Large widgets need 12 V.")
    decoding = Decoding(max_new_tokens=6, guard=False)
    whole = run_plan(plan, decoding)
    streamed = Streamed(plan, decoding)
    chunks = list(streamed)
    assert streamed.result is not None and "".join(chunks) == whole.text == streamed.result.text
    assert whole.prefill_tokens == sum(len(p) for p in plan.pieces)
    assert 1 <= whole.generated_tokens <= 6 and whole.first_token_at is not None
    assert whole.stop in ("eos", "length") and whole.cut == (whole.stop == "length")


def test_the_token_limit_cuts(tiny_backbone):
    plan = text_plan(tiny_backbone, "Say something long.", "")
    result = run_plan(plan, Decoding(max_new_tokens=1, guard=False))
    assert result.generated_tokens == 1 and result.stop in ("eos", "length")


def test_stripped_chunks_lose_only_the_outer_space():
    assert list(stripped(iter(["  ", " Hello", " ", "world ", " "]))) == ["Hello", " world"]
    assert "".join(stripped(iter(["\n", "a  ", "b\n"]))) == "a  b"
