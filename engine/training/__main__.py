import sys

from engine.training.train import main

sys.exit(main())
