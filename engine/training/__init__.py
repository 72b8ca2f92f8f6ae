"""Training the small parts (H2MT 3.4 / appendix E, ArcAligner 3.5): ``python -m engine.training``.
Public face: ``config.TrainConfig``, ``train.train``. A run's settings are in ``config``, its
documents and queries in ``corpus``, its state and cached memories in ``run``, the resumable run
folder in ``state``; one handler per stage (its parameters, data and loss) in ``stages``, the
loop that trains a stage in ``loop``, routing supervision in ``supervision``; the objectives
are in ``losses``, the training data in ``data``."""
