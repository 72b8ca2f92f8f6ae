"""Generating an answer: the prompts (``prompts``), the in-process reader (``reader``), greedy
decoding with its end-of-sequence ids and logits processors (``decoding``), the streamed text
(``streamer``) and the finished answer's clean-up (``cleanup``). The stop rules both readers apply
and the served reader: ``engine.serving``."""
