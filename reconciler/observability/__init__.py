"""Metrics, health endpoints, structured logs and Kubernetes events for the live reconciler.

- ``Metrics``: one Prometheus registry with Karpenter's metric names, label names and label values
  (so its dashboards keep working), the provider's families and the process collectors; our own
  additions use the ``adze_`` prefix.
- ``ObservabilityServer``: ``/metrics`` on the metrics port (8080) and ``/healthz`` + ``/readyz``
  on the health-probe port (8081), as the Karpenter chart wires its probes.
- ``configure_logging`` / ``log_decision``: one JSON object per line with Karpenter's keys
  (level, time, logger, message, then the facts), for stdlib and structlog loggers alike.
- ``EventRecorder``: core/v1 Events with client-go's aggregation (a repeat bumps ``count``),
  a per-object token bucket and Karpenter's per-event deduplication, never failing the caller.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reconciler.observability.events import EventRecorder, EventType
    from reconciler.observability.health import Check, HealthChecks, ObservabilityServer
    from reconciler.observability.logs import configure_logging, get_logger, log_decision
    from reconciler.observability.metric_types import DURATION_BUCKETS
    from reconciler.observability.metrics import Metrics

# Imported on first use: the offline commands reach metric_types through this package and need neither
# the HTTP server (aiohttp, ~0.2 s to import) nor the event recorder.
_HOMES = {
    "EventRecorder": "events", "EventType": "events",
    "Check": "health", "HealthChecks": "health", "ObservabilityServer": "health",
    "configure_logging": "logs", "get_logger": "logs", "log_decision": "logs",
    "DURATION_BUCKETS": "metric_types", "Metrics": "metrics",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DURATION_BUCKETS",
    "Check",
    "EventRecorder",
    "EventType",
    "HealthChecks",
    "Metrics",
    "ObservabilityServer",
    "configure_logging",
    "get_logger",
    "log_decision",
]
