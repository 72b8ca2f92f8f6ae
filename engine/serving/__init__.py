"""Serving the models that generate and encode: the generation worker that decodes the asks of
one model as one batch (continuous batching: ``worker``, ``batch``, ``request``), the stop rules
every reader applies (``stops``), what a reader is (``reader``: the ``Reader`` protocol) and a
reader on an OpenAI-compatible server (``remote_reader``: the HTTP client; ``remote_decoding``:
decoding there). Nothing here imports the rest of the engine."""
