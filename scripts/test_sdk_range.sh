#!/usr/bin/env bash
# The fast paths against the oldest and the newest opentelemetry-sdk that pyproject allows.
#
# pairwatch reads SDK internals on three hot paths (otel/sdk_fast.py: histogram aggregations,
# otel/span_fast.py: finished child spans, otel/sampler_fast.py: the SDK samplers' drops),
# and the API's context variable on every tracked call (otel/current.py); each checks the shape it expects and falls back to the public API
# when it does not match.  This builds one venv per end of the range, runs
# the tests that pin those paths, and prints whether each engaged, so that a new SDK
# release that moves an internal shows up as "fallback" here instead of silently costing
# 10x.  Usage: bash scripts/test_sdk_range.sh [oldest|newest]...  (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
oldest=$(sed -n 's/.*"opentelemetry-sdk>=\([0-9.]*\)".*/\1/p' pyproject.toml | head -1)
ends=("$@")
[ ${#ends[@]} -eq 0 ] && ends=(oldest newest)
for end in "${ends[@]}"; do
  venv=".venv-sdk-$end"
  if [ "$end" = oldest ]; then pins=("opentelemetry-api==$oldest" "opentelemetry-sdk==$oldest");
  else pins=("opentelemetry-api" "opentelemetry-sdk"); fi
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -U pip
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -U "${pins[@]}" \
    msgspec prometheus-client wrapt pytest pytest-timeout pytest-asyncio hypothesis 2>&1 \
    | grep -v "^WARNING: Location" || true
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -e . 2>&1 \
    | grep -v "^WARNING: Location" || true
  echo "== opentelemetry-sdk $("$venv/bin/python" -c 'from importlib.metadata import version as v; print(v("opentelemetry-sdk"))') ($end)" >&2
  "$venv/bin/python" - <<'PY'
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pairwatch.otel import root_fast, span_fast
from pairwatch.otel.telemetry import Telemetry

tracer = TracerProvider()
tracer.add_span_processor(BatchSpanProcessor(InMemorySpanExporter()))
t = Telemetry(MeterProvider(metric_readers=[InMemoryMetricReader()]), tracer)
print("histogram fast path:", "engaged" if t.latency_writer.enabled else "fallback")
print("child span fast path:", "engaged" if span_fast.usable(t.tracer) else "fallback")
print("batch span fast path:", "engaged" if root_fast.available() else "fallback")
from pairwatch.otel import current
print("current context read:", "directly" if current.reads_directly else "through the API")
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from pairwatch.otel import sampler_fast
ratio = ParentBased(TraceIdRatioBased(0.01))
print("ratio sampler's drops:", "decided" if sampler_fast.drops_for(ratio) else "asked")
PY
  # test_sdk_fast.py pins bit-for-bit equality with one record per value (cumulative and
  # delta, views, exemplars), and that the fast path engaged; test_spans_batch.py that a
  # batch's children are the spans start_span would make, whichever shortcuts this SDK allows;
  # test_root_fast.py that the batch span built finished is the one start_span makes;
  # test_current_context.py that the context read in one call is the API's own;
  # test_sampler_fast.py that the drops decided without the sampler are the sampler's own.
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/test_sdk_fast.py \
    tests/perf/test_spans_fast.py tests/perf/test_spans_batch.py tests/perf/test_root_fast.py \
    tests/perf/test_sampler_fast.py \
    tests/pairing/test_depth_guard.py tests/test_bounds.py tests/test_current_context.py
done
