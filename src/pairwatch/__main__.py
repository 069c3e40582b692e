"""``python -m pairwatch ...``: the same command as the ``pairwatch`` script."""

import sys

from pairwatch.cli import main

sys.exit(main())
