"""Metrics, health endpoints, structured logs and Kubernetes events for the live reconciler.

- ``Metrics``: a Prometheus registry with Karpenter's metric names and labels where the meaning
  is the same (so existing dashboards keep working); our own additions use the ``adze_`` prefix.
- ``ObservabilityServer``: ``/metrics`` on the metrics port (8080) and ``/healthz`` + ``/readyz``
  on the health-probe port (8081), as the Karpenter chart wires its probes.
- ``configure_logging`` / ``log_decision``: one JSON object per line with Karpenter's keys
  (level, time, logger, message, then the facts), for stdlib and structlog loggers alike.
- ``EventRecorder``: core/v1 Events with client-go's aggregation (a repeat bumps ``count``),
  a per-object token bucket and Karpenter's per-event deduplication, never failing the caller.
"""

from reconciler.observability.events import EventRecorder, EventType
from reconciler.observability.health import Check, HealthChecks, ObservabilityServer
from reconciler.observability.logs import configure_logging, get_logger, log_decision
from reconciler.observability.metrics import DURATION_BUCKETS, Metrics

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
