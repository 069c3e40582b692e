"""One multilspy session, run by the interpreter of the multilspy virtualenv.

``python multilspy_child.py REPO {bare|instrumented}``: starts multilspy's Python server
(jedi-language-server) on ``REPO``, asks definition, references, hover and completions, and
prints one JSON line: what the caller got, and pairwatch's counters (instrumented only).
multilspy pins pygls 1.x, so it cannot share the dev virtualenv (pygls 2.x); this child runs
in ``.venv-multilspy`` with pairwatch from ``src/``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from multilspy import SyncLanguageServer
from multilspy.multilspy_config import MultilspyConfig
from multilspy.multilspy_logger import MultilspyLogger
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import pairwatch

REPO, MODE = sys.argv[1], sys.argv[2]


def counters(reader: InMemoryMetricReader) -> dict[str, Any]:
    pairwatch.flush()
    found: dict[str, int] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if not hasattr(metric.data, "is_monotonic"):
                    continue
                for point in metric.data.data_points:
                    if point.value:
                        attrs = point.attributes or {}
                        reason = attrs.get("pairwatch.close_reason")
                        key = metric.name + (f"[{reason}]" if reason else "")
                        found[key] = found.get(key, 0) + int(point.value)
                        if metric.name == "batch.requests":
                            found["labels"] = [
                                attrs.get("pairwatch.integration"),
                                attrs.get("pairwatch.transport"),
                            ]
    return found


def main() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    config = MultilspyConfig.from_dict({"code_language": "python"})
    lsp = SyncLanguageServer.create(config, MultilspyLogger(), REPO)
    if MODE == "instrumented":
        pairwatch.instrument(lsp, meter_provider=provider)
    with lsp.start_server():
        seen = [
            lsp.request_definition("m.py", 7, 1),
            lsp.request_references("m.py", 3, 4),
            lsp.request_hover("m.py", 7, 1) is not None,
            len(lsp.request_completions("m.py", 8, 5)) > 0,
        ]
    result = {"seen": json.loads(json.dumps(seen, default=str)), "counters": counters(reader)}
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
