"""``python -m laptime ...``: the same as the ``laptime`` command."""

import sys

from .cli import main

sys.exit(main())
