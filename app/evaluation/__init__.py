"""The Evaluation tab (``evaluation_tab``): a question file run against one manual, each answer
judged as ``python -m bench.probe`` judges it, to see where answers fail."""
