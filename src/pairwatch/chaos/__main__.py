"""``python -m pairwatch.chaos``: see `pairwatch.chaos.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
