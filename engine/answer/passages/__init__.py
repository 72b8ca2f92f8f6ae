"""What the manual gives an answer: a section's units (``units``: one sentence splitter), the
routed sections and the reader's context blocks (``sections``), the units scored against the
question (``sentences``, ``answer_type``), the quote (``quote``), the evidence lines of an answer
(``evidence``), their pages in the PDF (``pages``), and those steps on a route (``grounding``)."""
