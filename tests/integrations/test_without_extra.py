"""Without the ``instrumentation`` extra: the instrumentor says which extra to install, and
everything else (``instrument``, suppression through the API's context key) still works.

The extra is hidden in a fresh interpreter the way Python reports an absent package: its
``sys.modules`` entries are ``None``, so importing it raises ``ModuleNotFoundError``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

HIDE_EXTRA = """
import sys
for name in ("opentelemetry.instrumentation", "opentelemetry.instrumentation.instrumentor",
             "opentelemetry.instrumentation.utils"):
    sys.modules[name] = None
"""


def run(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-c", HIDE_EXTRA + textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_instrumentor_names_the_extra():
    out = run(
        """
        try:
            from pairwatch.instrumentor import PairwatchInstrumentor
        except ImportError as exc:
            print(type(exc).__name__, "|", exc)
        """
    )
    assert out.returncode == 0, out.stderr
    kind, message = out.stdout.strip().split(" | ", 1)
    assert kind == "ModuleNotFoundError"
    assert 'pip install "pairwatch[instrumentation]"' in message
    assert out.stderr == ""


def test_instrument_and_suppression_work_without_it():
    out = run(
        """
        import json
        from opentelemetry import context
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        import pairwatch

        class Echo:
            def call(self, body):
                return [{"jsonrpc": "2.0", "id": m["id"], "result": 1} for m in json.loads(body)]

        reader = InMemoryMetricReader()
        echo = pairwatch.instrument(
            Echo(), send="call", receive="call", meter_provider=MeterProvider([reader])
        )
        batch = json.dumps([{"jsonrpc": "2.0", "id": i, "method": "m"} for i in range(4)])
        key = context._SUPPRESS_INSTRUMENTATION_KEY
        token = context.attach(context.set_value(key, True))
        echo.call(batch)
        context.detach(token)
        echo.call(batch)
        pairwatch.flush()
        points = {
            m.name: sum(p.value for p in m.data.data_points)
            for rm in reader.get_metrics_data().resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name in ("batch.closed", "batch.requests")
        }
        print(points["batch.closed"], points["batch.requests"])
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "4"]  # the suppressed call counted nothing
