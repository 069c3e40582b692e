import sys

from pairwatch.cli import main

sys.exit(main())
