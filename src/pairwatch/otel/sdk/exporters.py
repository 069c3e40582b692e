"""What a metric exporter asked of the reader that feeds it.

The SDK keeps an exporter's preferred temporality and aggregation in private attributes;
an exporter that wraps another (:class:`pairwatch.otel.remote_write.PrometheusShaped`) asks
for what the inner one asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["preferences"]


def preferences(exporter: object) -> tuple[Any, Any]:
    """``(preferred_temporality, preferred_aggregation)`` of ``exporter``, None when unset."""
    return (
        getattr(exporter, "_preferred_temporality", None),
        getattr(exporter, "_preferred_aggregation", None),
    )
