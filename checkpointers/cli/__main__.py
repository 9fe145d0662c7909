"""``python -m checkpointers.cli``: the ``agentstate-reducer`` console script."""

import sys

from .main import main

sys.exit(main())
