"""Moved to :mod:`pairwatch.alerting.render`: `pairwatch dashboards export` renders the rules at
run time, so they live in the package. `import alert_yaml` here gives that module itself."""

import sys

from pairwatch.alerting import render

sys.modules[__name__] = render
