"""Moved to :mod:`pairwatch.alerting.threshold_tests`: `pairwatch dashboards export` renders
the rules at run time, so they live in the package. `import rule_tests` gives that module."""

import sys

from pairwatch.alerting import threshold_tests

sys.modules[__name__] = threshold_tests
