"""``python -m engine.training.fusion``: the fusion's training run (``run.main``)."""
from engine.training.fusion.run import main

raise SystemExit(main())
