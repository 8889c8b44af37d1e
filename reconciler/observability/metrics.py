"""Prometheus metrics with Karpenter's names and labels where the meaning is the same (so existing
dashboards keep working); our own additions use the ``adze_`` prefix."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class Metrics:
    """Every metric the reconciler exports, on a private registry (tests build their own)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.build_info = Gauge("karpenter_build_info", "A constant 1 labeled by version.", ["version"], registry=r)
        self.nodeclaims_created = Counter(
            "karpenter_nodeclaims_created",
            "NodeClaims created, by reason and owning nodepool.",
            ["reason", "nodepool"],
            registry=r,
        )
        self.nodeclaims_terminated = Counter(
            "karpenter_nodeclaims_terminated",
            "NodeClaims terminated, by owning nodepool, capacity type and zone.",
            ["nodepool", "capacity_type", "zone"],
            registry=r,
        )
        self.nodeclaims_disrupted = Counter(
            "karpenter_nodeclaims_disrupted",
            "NodeClaims disrupted, by reason and owning nodepool.",
            ["reason", "nodepool"],
            registry=r,
        )
        self.nodeclaims_termination_duration = Histogram(
            "karpenter_nodeclaims_termination_duration_seconds",
            "Duration of NodeClaim termination.",
            ["nodepool"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.nodes_created = Counter(
            "karpenter_nodes_created", "Nodes created, by owning nodepool.", ["nodepool"], registry=r
        )
        self.nodes_terminated = Counter(
            "karpenter_nodes_terminated", "Nodes terminated, by owning nodepool.", ["nodepool"], registry=r
        )
        self.nodes_drained = Counter(
            "karpenter_nodes_drained", "Nodes drained, by owning nodepool.", ["nodepool"], registry=r
        )
        self.eviction_requests = Counter(
            "karpenter_nodes_eviction_requests", "Eviction requests made, by HTTP response code.", ["code"], registry=r
        )
        self.pods_scheduling_decision_duration = Histogram(
            "karpenter_pods_scheduling_decision_duration_seconds",
            "Time from first seeing a pending pod to the first scheduling decision about it.",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.scheduling_duration = Histogram(
            "karpenter_provisioner_scheduling_duration_seconds",
            "Duration of a scheduling simulation.",
            ["controller"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.scheduling_queue_depth = Gauge(
            "karpenter_provisioner_scheduling_queue_depth",
            "Pods currently waiting to be scheduled.",
            ["controller"],
            registry=r,
        )
        self.nodepool_usage = Gauge(
            "karpenter_nodepools_usage",
            "Resources provisioned for a nodepool.",
            ["nodepool", "resource_type"],
            registry=r,
        )
        self.nodepool_limit = Gauge(
            "karpenter_nodepools_limit", "Resource limits of a nodepool.", ["nodepool", "resource_type"], registry=r
        )
        self.nodepool_allowed_disruptions = Gauge(
            "karpenter_nodepools_allowed_disruptions",
            "Nodes of a nodepool that may be disrupted now.",
            ["nodepool", "reason"],
            registry=r,
        )
        self.offering_price = Gauge(
            "karpenter_cloudprovider_instance_type_offering_price_estimate",
            "Estimated hourly price of an instance type offering.",
            ["instance_type", "capacity_type", "zone"],
            registry=r,
        )
        self.offering_available = Gauge(
            "karpenter_cloudprovider_instance_type_offering_available",
            "1 when an instance type offering is available.",
            ["instance_type", "capacity_type", "zone"],
            registry=r,
        )
        self.cloudprovider_errors = Counter(
            "karpenter_cloudprovider_errors",
            "Errors returned by cloud provider calls.",
            ["controller", "method", "provider", "error"],
            registry=r,
        )
        self.cloudprovider_duration = Histogram(
            "karpenter_cloudprovider_duration_seconds",
            "Duration of cloud provider calls.",
            ["controller", "method", "provider"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.interruption_received = Counter(
            "karpenter_interruption_received_messages",
            "Messages received from the interruption queue.",
            ["message_type"],
            registry=r,
        )
        self.interruption_deleted = Counter(
            "karpenter_interruption_deleted_messages", "Messages deleted from the interruption queue.", registry=r
        )
        self.interruption_queue_duration = Histogram(
            "karpenter_interruption_message_queue_duration_seconds",
            "Time an interruption message waited in the queue.",
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.disruption_decisions = Counter(
            "karpenter_voluntary_disruption_decisions",
            "Disruption decisions, by decision, reason and type.",
            ["decision", "reason", "consolidation_type"],
            registry=r,
        )
        self.disruption_eligible_nodes = Gauge(
            "karpenter_voluntary_disruption_eligible_nodes",
            "Nodes eligible for disruption, by reason.",
            ["reason"],
            registry=r,
        )
        self.cluster_state_synced = Gauge(
            "karpenter_cluster_state_synced", "1 when the cluster state cache is synced.", registry=r
        )
        self.cluster_state_node_count = Gauge(
            "karpenter_cluster_state_node_count", "Nodes in the cluster state cache.", registry=r
        )
        self.batch_size = Histogram(
            "adze_provisioner_batch_size",
            "Pods per provisioning batch.",
            buckets=(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000),
            registry=r,
        )
        self.batch_window = Histogram(
            "adze_provisioner_batch_window_seconds",
            "How long a provisioning batch stayed open.",
            buckets=DURATION_BUCKETS,
            registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def sample(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """The current value of one sample (``name`` as exposed, e.g. ``..._total``), for tests and logs."""
        return self.registry.get_sample_value(name, dict(labels or {}))
