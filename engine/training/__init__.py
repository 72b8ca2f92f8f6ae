"""Training the small parts (H2MT 3.4 / appendix E, ArcAligner 3.5): ``python -m engine.training``.
Public face: ``TrainConfig``, ``train``; the objectives are in ``losses``, the training data in
``data``."""
