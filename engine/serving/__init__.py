"""Serving concurrent asks: the generation worker that decodes the asks of one model as one
batch (continuous batching: ``worker``, ``batch``, ``request``) and the gatherer that lets the
question encoders run the questions arriving together as one batch (``gather``)."""
