"""Metric families on one registry, each catalogued as it is exposed (name, type, label names).

The catalogue (``MetricFactory.declared``) is what ``/metrics`` serves, so a test can diff it with
Karpenter's metric reference. Two kinds beyond prometheus_client's own:

- ``QuantileSummary``: a summary with Karpenter's quantiles (0, 0.5, 0.9, 0.99, 1) over the last
  ten minutes, as Go's client computes them (prometheus_client summaries only expose sum and count,
  and Karpenter's dashboards read ``{quantile="0.5"}``);
- ``GaugeStore``: gauges kept per object and replaced as a whole, as Karpenter's ``metrics.Store``,
  so the samples of a deleted node or pod disappear with it.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics
from prometheus_client.metrics_core import Metric

# Karpenter's series have no ``_created`` companions; dashboards and the reference know none.
disable_created_metrics()

# Karpenter's metrics.DurationBuckets().
DURATION_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60, 120, 150, 300,
    450, 600,
)
SUMMARY_QUANTILES = (0.0, 0.5, 0.9, 0.99, 1.0)
SUMMARY_MAX_AGE = 600.0  # Go's DefMaxAge

Labels = Mapping[str, str]


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    return tuple(start * factor**i for i in range(count))


@dataclass(frozen=True, slots=True)
class Declared:
    """One family as ``/metrics`` exposes it: counters with their ``_total`` suffix, as Karpenter documents."""

    name: str
    kind: str  # counter | gauge | histogram | summary
    labels: tuple[str, ...]


class QuantileSummary:
    """A labelled summary exposing quantiles over a sliding window, plus all-time sum and count."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labels)
        self._clock = clock
        self._lock = threading.Lock()
        self._window: dict[tuple[str, ...], deque[tuple[float, float]]] = {}
        self._totals: dict[tuple[str, ...], tuple[float, int]] = {}

    def observe(self, value: float, labels: Labels | None = None) -> None:
        key = tuple(str((labels or {}).get(name, "")) for name in self.labelnames)
        now = self._clock()
        with self._lock:
            window = self._window.setdefault(key, deque())
            window.append((now, value))
            total, count = self._totals.get(key, (0.0, 0))
            self._totals[key] = (total + value, count + 1)

    def collect(self) -> Iterable[Metric]:
        metric = Metric(self.name, self.documentation, "summary")
        horizon = self._clock() - SUMMARY_MAX_AGE
        with self._lock:
            for key, window in self._window.items():
                while window and window[0][0] < horizon:
                    window.popleft()
                values = sorted(v for _, v in window)
                labels = dict(zip(self.labelnames, key, strict=True))
                for quantile in SUMMARY_QUANTILES:
                    metric.add_sample(self.name, {**labels, "quantile": f"{quantile:g}"}, _quantile(values, quantile))
                total, count = self._totals[key]
                metric.add_sample(f"{self.name}_sum", labels, total)
                metric.add_sample(f"{self.name}_count", labels, float(count))
        yield metric


def _quantile(values: Sequence[float], quantile: float) -> float:
    if not values:
        return math.nan  # as Go's summary reports an empty window
    return values[min(len(values) - 1, max(0, math.ceil(quantile * len(values)) - 1))]


class GaugeStore:
    """Gauge samples grouped by the object they describe; ``update``/``delete`` one object, or replace all."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labels)
        self._lock = threading.Lock()
        self._objects: dict[str, list[tuple[dict[str, str], float]]] = {}

    def _complete(self, labels: Labels) -> dict[str, str]:
        return {name: str(labels.get(name, "")) for name in self.labelnames}

    def update(self, key: str, samples: Iterable[tuple[Labels, float]]) -> None:
        entries = [(self._complete(labels), float(value)) for labels, value in samples]
        with self._lock:
            self._objects[key] = entries

    def delete(self, key: str) -> None:
        with self._lock:
            self._objects.pop(key, None)

    def replace_all(self, objects: Mapping[str, Iterable[tuple[Labels, float]]]) -> None:
        entries = {key: [(self._complete(labels), float(value)) for labels, value in samples]
                   for key, samples in objects.items()}
        with self._lock:
            self._objects = entries

    def keys(self) -> set[str]:
        with self._lock:
            return set(self._objects)

    def collect(self) -> Iterable[Metric]:
        metric = Metric(self.name, self.documentation, "gauge")
        with self._lock:
            for samples in self._objects.values():
                for labels, value in samples:
                    metric.add_sample(self.name, labels, value)
        yield metric


class MetricFactory:
    """Creates families on ``registry`` and records each in ``declared``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.declared: dict[str, Declared] = {}

    def _declare(self, name: str, kind: str, labels: Sequence[str]) -> None:
        if name in self.declared:
            raise ValueError(f"metric {name} declared twice")
        self.declared[name] = Declared(name, kind, tuple(labels))

    def counter(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Counter:
        if not name.endswith("_total"):
            raise ValueError(f"counter {name} must end in _total")
        self._declare(name, "counter", labels)
        return Counter(name.removesuffix("_total"), documentation, list(labels), registry=self.registry)

    def gauge(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Gauge:
        self._declare(name, "gauge", labels)
        return Gauge(name, documentation, list(labels), registry=self.registry)

    def histogram(self, name: str, documentation: str, labels: Sequence[str] = (),
                  buckets: Sequence[float] = DURATION_BUCKETS) -> Histogram:
        self._declare(name, "histogram", labels)
        return Histogram(name, documentation, list(labels), buckets=tuple(buckets), registry=self.registry)

    def summary(self, name: str, documentation: str, labels: Sequence[str] = ()) -> QuantileSummary:
        self._declare(name, "summary", labels)
        summary = QuantileSummary(name, documentation, labels)
        self.registry.register(summary)  # type: ignore[arg-type]
        return summary

    def gauge_store(self, name: str, documentation: str, labels: Sequence[str]) -> GaugeStore:
        self._declare(name, "gauge", labels)
        store = GaugeStore(name, documentation, labels)
        self.registry.register(store)  # type: ignore[arg-type]
        return store
