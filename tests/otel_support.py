"""One OpenTelemetry SDK tracer and meter provider for the tests, with in-memory exporters.

The API takes a global provider once per process, so the first test that asks installs them and
every later one reads from the same exporters (``spans()`` clears what earlier tests left).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_installed: list[tuple[InMemorySpanExporter, InMemoryMetricReader]] = []


def _install() -> tuple[InMemorySpanExporter, InMemoryMetricReader]:
    if not _installed:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        _installed.append((exporter, reader))
    return _installed[0]


class Otel:
    """The installed providers' exporters, cleared when the fixture starts."""

    def __init__(self) -> None:
        self.exporter, self.reader = _install()
        self.exporter.clear()
        self._baseline = self.points()

    @property
    def tracer(self) -> Any:
        return trace.get_tracer("tests")

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        found = list(self.exporter.get_finished_spans())
        return [s for s in found if name is None or s.name == name]

    def points(self) -> dict[tuple[str, tuple[tuple[str, Any], ...]], float]:
        """Metric name and attributes -> the counter's value or the histogram's sum, so far."""
        out: dict[tuple[str, tuple[tuple[str, Any], ...]], float] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return out
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        key = (metric.name, tuple(sorted(dict(point.attributes or {}).items())))
                        out[key] = float(getattr(point, "value", getattr(point, "sum", 0)))
        return out

    def added(self) -> dict[tuple[str, tuple[tuple[str, Any], ...]], float]:
        """What the metrics gained since the fixture started (non-zero changes only)."""
        now = self.points()
        return {k: v - self._baseline.get(k, 0.0) for k, v in now.items() if v != self._baseline.get(k, 0.0)}


@pytest.fixture(name="otel")
def otel_fixture() -> Iterator[Otel]:
    yield Otel()
