"""Moved to :mod:`pairwatch.alerting.rules`: `pairwatch dashboards export` renders the rules at
run time, so they live in the package. `import alerts` here gives that module itself."""

import sys

from pairwatch.alerting import rules

sys.modules[__name__] = rules
