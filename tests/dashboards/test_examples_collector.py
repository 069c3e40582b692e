"""examples/otel-collector.yaml is well-formed: every component a pipeline names is defined.

No Collector binary is available here, so this is a structural check only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG = REPO_ROOT / "examples" / "otel-collector.yaml"


def test_collector_pipeline_is_consistent(yaml_module: Any) -> None:
    config = yaml_module.safe_load(CONFIG.read_text(encoding="utf-8"))
    pipeline = config["service"]["pipelines"]["metrics"]
    assert pipeline["receivers"] == ["otlp"]
    for kind in ("receivers", "processors", "exporters"):
        for name in pipeline[kind]:
            assert name in config[kind], f"{kind}: {name} is not defined"
    assert set(config["receivers"]["otlp"]["protocols"]) == {"grpc", "http"}
    # A namespace would prefix every series and break the dashboard's metric names.
    for exporter in config["exporters"].values():
        assert "namespace" not in exporter
