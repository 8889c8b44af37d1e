"""The framework families Karpenter's process exports beside its own: controller-runtime's reconcile
metrics, client-go's request metrics, leader election, and operatorpkg's per-kind status-condition and
termination metrics (``operator_<kind>_...``), with their upstream names and label names."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter, Histogram

from reconciler.observability.metric_types import GaugeStore, MetricFactory, exponential_buckets

RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
                     1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60)
# Karpenter's status controllers use ExponentialBuckets(0.5, 2, 15); the EC2NodeClass one keeps the default.
CONDITION_BUCKETS = exponential_buckets(0.5, 2, 15)
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# The object labels Karpenter adds to a kind's status metrics (``status.WithLabels``), as Prometheus labels.
NODECLASS_LABEL = "karpenter_k8s_aws_ec2nodeclass"
NODEPOOL_LABEL = "karpenter_sh_nodepool"
INITIALIZED_LABEL = "karpenter_sh_initialized"
STATUS_KINDS: dict[str, tuple[tuple[str, ...], tuple[float, ...]]] = {
    "nodeclaim": ((NODECLASS_LABEL, NODEPOOL_LABEL), CONDITION_BUCKETS),
    "nodepool": ((), CONDITION_BUCKETS),
    "node": ((NODECLASS_LABEL, NODEPOOL_LABEL, INITIALIZED_LABEL), CONDITION_BUCKETS),
    "ec2nodeclass": ((), DEFAULT_BUCKETS),
}


@dataclass(slots=True)
class StatusMetrics:
    """operatorpkg's metrics for one kind: its objects' conditions and how long deletions take."""

    extra_labels: tuple[str, ...]
    transitions: Counter
    transition_seconds: Histogram
    current_status_seconds: GaugeStore
    count: GaugeStore
    termination_duration: Histogram
    termination_current_time: GaugeStore


class RuntimeMetrics:
    def __init__(self, f: MetricFactory) -> None:
        controller = ["controller"]
        self.reconcile_total = f.counter("controller_runtime_reconcile_total",
                                         "Total number of reconciliations per controller", ["controller", "result"])
        self.reconcile_errors = f.counter("controller_runtime_reconcile_errors_total",
                                          "Total number of reconciliation errors per controller", controller)
        self.reconcile_panics = f.counter("controller_runtime_reconcile_panics_total",
                                          "Total number of reconciliation panics per controller", controller)
        self.reconcile_time = f.histogram("controller_runtime_reconcile_time_seconds",
                                          "Length of time per reconciliation per controller", controller,
                                          buckets=RECONCILE_BUCKETS)
        self.max_concurrent_reconciles = f.gauge("controller_runtime_max_concurrent_reconciles",
                                                 "Maximum number of concurrent reconciles per controller", controller)
        self.active_workers = f.gauge("controller_runtime_active_workers",
                                      "Number of currently used workers per controller", controller)
        self.client_requests = f.counter("client_go_request_total",
                                         "Number of HTTP requests, partitioned by status code and method.",
                                         ["code", "method"])
        self.client_request_duration = f.histogram(
            "client_go_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, group, version, kind, and subresource.",
            ["verb", "group", "version", "kind", "subresource"], buckets=exponential_buckets(0.001, 1.5, 20))
        self.leader = f.gauge("leader_election_master_status", "Gauge of if the reporting system is master of the "
                              "relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to "
                              "identify the lease. Please make sure to group by name.", ["name"])
        self.status: dict[str, StatusMetrics] = {kind: _status_metrics(f, kind, extra, buckets)
                                                 for kind, (extra, buckets) in STATUS_KINDS.items()}


def _status_metrics(f: MetricFactory, kind: str, extra: tuple[str, ...], buckets: tuple[float, ...]) -> StatusMetrics:
    prefix = f"operator_{kind}"
    gauge_labels = ("namespace", "name", "type", "status", "reason", *extra)
    return StatusMetrics(
        extra_labels=extra,
        transitions=f.counter(f"{prefix}_status_condition_transitions_total",
                              "The count of transitions of a given object, type and status.",
                              ["type", "status", "reason", *extra]),
        transition_seconds=f.histogram(
            f"{prefix}_status_condition_transition_seconds", "The amount of time a condition was in a given state "
            "before transitioning. e.g. Alarm := P99(Updated=False) > 5 minutes", ["type", "status", *extra],
            buckets=buckets),
        current_status_seconds=f.gauge_store(
            f"{prefix}_status_condition_current_status_seconds", "The current amount of time in seconds that a status "
            "condition has been in a specific state. Alarm := P99(Updated=Unknown) > 5 minutes", gauge_labels),
        count=f.gauge_store(f"{prefix}_status_condition_count", "The number of a condition for a given object, type "
                            "and status. e.g. Alarm := Available=False > 0", gauge_labels),
        termination_duration=f.histogram(f"{prefix}_termination_duration_seconds",
                                         "The amount of time taken by an object to terminate completely.", extra,
                                         buckets=buckets),
        termination_current_time=f.gauge_store(
            f"{prefix}_termination_current_time_seconds",
            "The current amount of time in seconds that an object has been in terminating state.",
            ("namespace", "name", *extra)),
    )

