"""Prometheus metrics with Karpenter's names, label names and label values (so its dashboards and alerts
work unchanged); Adze's own additions use the ``adze_`` prefix.

One ``Metrics`` is one registry, served as a whole on ``/metrics``: Karpenter's core families (below),
the controller-runtime, client-go, leader-election and status-condition families (``runtime``), the
cloud provider's own group (``group("aws", ...)``, registered by the provider given this object) and
the process and Python platform collectors. Each family is declared once and set by the code that does
the thing it counts; ``declared()`` lists them for the reference diff in the tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, generate_latest

from reconciler.observability.metric_types import (
    DURATION_BUCKETS,
    Declared,
    MetricFactory,
    exponential_buckets,
)
from reconciler.observability.runtime_metrics import RuntimeMetrics

# Karpenter labels node metrics by every well-known node label of the AWS provider (``v1.WellKnownLabels``), each
# by the part after "/" in snake_case, plus the node's name, phase and whether Karpenter manages it.
WELL_KNOWN_NODE_LABELS = (
    "karpenter.sh/nodepool", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type", "kubernetes.io/arch", "kubernetes.io/os", "karpenter.sh/capacity-type",
    "node.kubernetes.io/windows-build", "topology.k8s.aws/zone-id",
    *(f"karpenter.k8s.aws/{name}" for name in (
        "capacity-reservation-id", "capacity-reservation-type", "capacity-reservation-interruptible",
        "instance-hypervisor", "instance-encryption-in-transit-supported", "instance-category",
        "instance-capability-flex", "instance-family", "instance-generation", "instance-size", "instance-local-nvme",
        "instance-cpu", "instance-cpu-manufacturer", "instance-cpu-sustained-clock-speed-mhz", "instance-memory",
        "instance-ebs-bandwidth", "instance-network-bandwidth", "instance-gpu-name", "instance-gpu-manufacturer",
        "instance-gpu-count", "instance-gpu-memory", "instance-accelerator-name", "instance-accelerator-manufacturer",
        "instance-accelerator-count", "instance-tenancy", "placement-group-id", "placement-group-partition")),
)
NODE_LABEL_KEYS = {key.split("/", 1)[1].replace("-", "_"): key for key in WELL_KNOWN_NODE_LABELS}
NODE_METRIC_LABELS = (*NODE_LABEL_KEYS, "node_name", "phase", "managed")
POD_STATE_LABELS = ("name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch", "capacity_type",
                    "instance_type", "phase", "ready", "managed")
NODE_LIFETIME_BUCKETS = tuple(h * 3600.0 for h in (0.25, 0.5, 0.75, 1, 2, 4, 6, 8, 10, 12, 16, 20)) + tuple(
    d * 86400.0 for d in (1, 2, 3, 5, 10, 15, 20, 25, 30))
BATCH_SIZE_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)

G = TypeVar("G")


class Metrics:
    """Every metric one reconciler process exports, on one registry (tests build their own)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.factory = f = MetricFactory(self.registry)
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=self.registry)
        self._groups: dict[str, Any] = {}
        self.runtime = RuntimeMetrics(f)

        self.build_info = f.gauge("karpenter_build_info", "A metric with a constant '1' value labeled by version "
                                  "from which karpenter was built.", ["version", "goversion", "goarch", "commit"])
        # -- NodeClaims ------------------------------------------------------------------------------
        self.nodeclaims_created = f.counter(
            "karpenter_nodeclaims_created_total", "Number of nodeclaims created in total by Karpenter. Labeled by "
            "reason the nodeclaim was created, the owning nodepool, and if min values was relaxed for this nodeclaim.",
            ["reason", "nodepool", "min_values_relaxed"])
        self.nodeclaims_terminated = f.counter(
            "karpenter_nodeclaims_terminated_total", "Number of nodeclaims terminated in total by Karpenter. Labeled "
            "by the owning nodepool, capacity type, and zone.", ["nodepool", "capacity_type", "zone"])
        self.nodeclaims_disrupted = f.counter(
            "karpenter_nodeclaims_disrupted_total", "Number of nodeclaims disrupted in total by Karpenter. Labeled by "
            "reason the nodeclaim was disrupted and the owning nodepool.", ["reason", "nodepool", "capacity_type"])
        self.nodeclaims_termination_duration = f.histogram(
            "karpenter_nodeclaims_termination_duration_seconds", "Duration of NodeClaim termination in seconds.",
            ["nodepool"], buckets=exponential_buckets(1, 2, 12))
        self.nodeclaims_instance_termination_duration = f.histogram(
            "karpenter_nodeclaims_instance_termination_duration_seconds",
            "Duration of CloudProvider Instance termination in seconds.", ["nodepool"],
            buckets=exponential_buckets(1, 2, 11))
        self.nodeclaims_unhealthy_disrupted = f.counter(
            "karpenter_nodeclaims_unhealthy_disrupted_total", "Number of unhealthy nodeclaims disrupted in total by "
            "Karpenter. Labeled by condition on the node was disrupted, the owning nodepool, and the image ID.",
            ["condition", "nodepool", "capacity_type", "image_id"])
        # -- Nodes -------------------------------------------------------------------------------------
        self.nodes_created = f.counter("karpenter_nodes_created_total", "Number of nodes created in total by "
                                       "Karpenter. Labeled by owning nodepool and zone.", ["nodepool", "zone"])
        self.nodes_terminated = f.counter("karpenter_nodes_terminated_total", "Number of nodes terminated in total "
                                          "by Karpenter. Labeled by owning nodepool and zone.", ["nodepool", "zone"])
        self.nodes_drained = f.counter("karpenter_nodes_drained_total", "The total number of nodes drained by "
                                       "Karpenter", ["nodepool"])
        self.nodes_termination_duration = f.summary(
            "karpenter_nodes_termination_duration_seconds",
            "The time taken between a node's deletion request and the removal of its finalizer", ["nodepool"])
        self.nodes_lifetime_duration = f.histogram(
            "karpenter_nodes_lifetime_duration_seconds", "The lifetime duration of the nodes since creation.",
            ["nodepool"], buckets=NODE_LIFETIME_BUCKETS)
        node_resource = (*NODE_METRIC_LABELS, "resource_type")
        self.nodes_allocatable = f.gauge_store(
            "karpenter_nodes_allocatable", "Node allocatable are the resources allocatable by nodes.", node_resource)
        self.nodes_total_pod_requests = f.gauge_store(
            "karpenter_nodes_total_pod_requests", "Node total pod requests are the resources requested by pods bound "
            "to nodes, including the DaemonSet pods.", node_resource)
        self.nodes_total_pod_limits = f.gauge_store(
            "karpenter_nodes_total_pod_limits", "Node total pod limits are the resources specified by pod limits, "
            "including the DaemonSet pods.", node_resource)
        self.nodes_total_daemon_requests = f.gauge_store(
            "karpenter_nodes_total_daemon_requests", "Node total daemon requests are the resource requested by "
            "DaemonSet pods bound to nodes.", node_resource)
        self.nodes_total_daemon_limits = f.gauge_store(
            "karpenter_nodes_total_daemon_limits", "Node total daemon limits are the resources specified by DaemonSet "
            "pod limits.", node_resource)
        self.nodes_system_overhead = f.gauge_store(
            "karpenter_nodes_system_overhead", "Node system daemon overhead are the resources reserved for system "
            "overhead, the difference between the node's capacity and allocatable values are reported by the "
            "status.", node_resource)
        self.nodes_current_lifetime = f.gauge_store(
            "karpenter_nodes_current_lifetime_seconds", "Node age in seconds", NODE_METRIC_LABELS)
        self.cluster_utilization = f.gauge_store(
            "karpenter_cluster_utilization_percent", "Utilization of allocatable resources by pod requests",
            ["resource_type"])
        # -- Pods --------------------------------------------------------------------------------------
        self.pods_state = f.gauge_store(
            "karpenter_pods_state", "Pod state is the current state of pods. This metric can be used several ways as "
            "it is labeled by the pod name, namespace, owner, node, nodepool name, zone, architecture, capacity type, "
            "instance type, pod phase, and pod readiness.", POD_STATE_LABELS)
        pod_key = ["name", "namespace"]
        self.pods_unstarted_time = f.gauge("karpenter_pods_unstarted_time_seconds",
                                           "The time from pod creation until the pod is running.", pod_key)
        self.pods_unbound_time = f.gauge("karpenter_pods_unbound_time_seconds",
                                         "The time from pod creation until the pod is bound.", pod_key)
        self.pods_provisioning_unstarted_time = f.gauge(
            "karpenter_pods_provisioning_unstarted_time_seconds", "The time from when Karpenter first thinks the pod "
            "can schedule until the pod is running.", pod_key)
        self.pods_provisioning_unbound_time = f.gauge(
            "karpenter_pods_provisioning_unbound_time_seconds", "The time from when Karpenter first thinks the pod "
            "can schedule until it binds.", pod_key)
        self.pods_provisioning_scheduling_undecided_time = f.gauge(
            "karpenter_pods_provisioning_scheduling_undecided_time_seconds", "The time from when Karpenter has seen a "
            "pod without making a scheduling decision for the pod.", pod_key)
        self.pods_startup_duration = f.summary("karpenter_pods_startup_duration_seconds",
                                               "The time from pod creation until the pod is running.")
        self.pods_bound_duration = f.histogram("karpenter_pods_bound_duration_seconds",
                                               "The time from pod creation until the pod is bound.")
        self.pods_provisioning_startup_duration = f.histogram(
            "karpenter_pods_provisioning_startup_duration_seconds",
            "The time from when Karpenter first thinks the pod can schedule until the pod is running.")
        self.pods_provisioning_bound_duration = f.histogram(
            "karpenter_pods_provisioning_bound_duration_seconds",
            "The time from when Karpenter first thinks the pod can schedule until it binds.")
        self.pods_scheduling_decision_duration = f.histogram(
            "karpenter_pods_scheduling_decision_duration_seconds",
            "The time it takes for Karpenter to first try to schedule a pod after it's been seen.")
        self.pods_eviction_requests = f.counter(
            "karpenter_pods_eviction_requests_total",
            "The total number of pod eviction requests made by Karpenter, labeled by response code", ["code"])
        self.pods_drained = f.counter("karpenter_pods_drained_total", "The total number of pods drained during node "
                                      "termination by Karpenter, labeled by reason", ["reason"])
        # -- Voluntary disruption ----------------------------------------------------------------------
        self.disruption_decisions = f.counter(
            "karpenter_voluntary_disruption_decisions_total", "Number of disruption decisions performed. Labeled by "
            "disruption decision, reason, and consolidation type.", ["decision", "reason", "consolidation_type"])
        self.disruption_decisions_by_nodepool = f.counter(
            "karpenter_voluntary_disruption_decisions_by_nodepool_total", "Number of disruption decisions performed by "
            "nodepool. Labeled by nodepool name, disruption decision, reason, and consolidation type.",
            ["nodepool", "decision", "reason", "consolidation_type"])
        self.disruption_eligible_nodes = f.gauge(
            "karpenter_voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.", ["reason"])
        self.disruption_evaluation_duration = f.histogram(
            "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
            "Duration of the disruption decision evaluation process in seconds. Labeled by method and consolidation "
            "type.",
            ["reason", "consolidation_type"])
        self.consolidation_timeouts = f.counter(
            "karpenter_voluntary_disruption_consolidation_timeouts_total", "Number of times the Consolidation "
            "algorithm has reached a timeout. Labeled by consolidation type.", ["consolidation_type"])
        for consolidation_type in ("multi", "single"):  # as Karpenter, counted from zero for both searches
            self.consolidation_timeouts.labels(consolidation_type=consolidation_type)
        self.disruption_failed_validations = f.counter(
            "karpenter_voluntary_disruption_failed_validations_total", "Number of candidates that were selected for "
            "disruption but failed validation. Labeled by consolidation type.", ["consolidation_type"])
        self.disruption_queue_failures = f.counter(
            "karpenter_voluntary_disruption_queue_failures_total", "The number of times that an enqueued disruption "
            "decision failed. Labeled by disruption method.", ["decision", "reason", "consolidation_type"])
        self.consolidation_score = f.histogram(
            "karpenter_consolidation_score", "Score of balanced consolidation moves. Labeled by decision, NodePool, "
            "and policy.", ["decision", "nodepool", "policy"], buckets=(0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0))
        self.consolidation_moves = f.counter(
            "karpenter_consolidation_moves_total", "Number of balanced consolidation moves. Labeled by decision, "
            "NodePool, and policy.", ["decision", "nodepool", "policy"])
        # -- NodePools ---------------------------------------------------------------------------------
        self.nodepool_allowed_disruptions = f.gauge(
            "karpenter_nodepools_allowed_disruptions", "The number of nodes for a given NodePool that can be "
            "concurrently disrupting at a point in time. Labeled by NodePool.", ["nodepool", "reason"])
        self.nodepool_nodes_consuming_budgets = f.gauge(
            "karpenter_nodepools_nodes_consuming_budgets", "The number of nodes consuming the budget of a nodepool at "
            "a point in time. Labeled by NodePool.", ["nodepool", "reason"])
        self.nodepool_usage = f.gauge_store(
            "karpenter_nodepools_usage", "The amount of resources that have been provisioned for a nodepool. Labeled "
            "by nodepool name and resource type.", ["resource_type", "nodepool"])
        self.nodepool_limit = f.gauge_store(
            "karpenter_nodepools_limit", "Limits specified on the nodepool that restrict the quantity of resources "
            "provisioned. Labeled by nodepool name and resource type.", ["resource_type", "nodepool"])
        self.nodepool_cost = f.gauge_store(
            "karpenter_nodepools_cost_total", "Total cost of the nodepool from Karpenter's perspective. Units are "
            "determined by the cloud provider. Not an authoritative source for billing.", ["nodepool"])
        self.nodepool_cost_errors = f.counter(
            "karpenter_nodepools_cost_tracker_errors_total", "Number of errors encountered during cost tracking "
            "operations. Labeled by nodepool and nodeclaim.", ["nodepool"])
        # -- Scheduler ---------------------------------------------------------------------------------
        self.scheduling_duration = f.histogram(
            "karpenter_scheduler_scheduling_duration_seconds",
            "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.", ["controller"])
        self.scheduling_queue_depth = f.gauge(
            "karpenter_scheduler_queue_depth", "The number of pods currently waiting to be scheduled.",
            ["controller", "scheduling_id"])
        self.scheduling_unfinished_work = f.gauge(
            "karpenter_scheduler_unfinished_work_seconds", "How many seconds of work has been done that is in "
            "progress and hasn't been observed by scheduling_duration_seconds.", ["controller", "scheduling_id"])
        self.unschedulable_pods = f.gauge("karpenter_scheduler_unschedulable_pods_count",
                                          "The number of unschedulable Pods.", ["controller"])
        self.ignored_pods = f.gauge("karpenter_scheduler_ignored_pods_count",
                                    "Number of pods ignored during scheduling by Karpenter")
        self.pending_pods_by_zone = f.gauge(
            "karpenter_scheduler_pending_pods_by_effective_zone_count", "Pending pods dimensioned by effective zone "
            "constraint: a zone name, 'flexible' (multiple zones), or 'none' (no valid intersection).",
            ["controller", "zone"])
        # -- Cluster state -----------------------------------------------------------------------------
        self.cluster_state_synced = f.gauge(
            "karpenter_cluster_state_synced", "Returns 1 if cluster state is synced and 0 otherwise.")
        self.cluster_state_node_count = f.gauge(
            "karpenter_cluster_state_node_count", "Current count of nodes in cluster state")
        self.cluster_state_unsynced_time = f.gauge(
            "karpenter_cluster_state_unsynced_time_seconds", "The time for which cluster state is not synced")
        # -- Cloud provider calls (every provider, as Karpenter's decorator measures them) -------------
        self.cloudprovider_duration = f.histogram(
            "karpenter_cloudprovider_duration_seconds", "Duration of cloud provider method calls. Labeled by the "
            "controller, method name and provider.", ["controller", "method", "provider"])
        self.cloudprovider_errors = f.counter(
            "karpenter_cloudprovider_errors_total", "Total number of errors returned from CloudProvider calls.",
            ["controller", "method", "provider", "error"])
        # -- Offerings of every NodePool's instance types (Karpenter's AWS metrics controller, any cloud here) --
        offering = ["instance_type", "capacity_type", "zone"]
        self.offering_price = f.gauge_store(
            "karpenter_cloudprovider_instance_type_offering_price_estimate", "Instance type offering estimated hourly "
            "price used when making informed decisions on node cost calculation, based on instance type, capacity "
            "type, and zone.", offering)
        self.offering_available = f.gauge_store(
            "karpenter_cloudprovider_instance_type_offering_available",
            "Instance type offering availability, based on instance type, capacity type, and zone", offering)
        # -- Adze's own --------------------------------------------------------------------------------
        self.batch_size = f.histogram("adze_provisioner_batch_size", "Pods per provisioning batch.",
                                      buckets=BATCH_SIZE_BUCKETS)
        self.batch_window = f.histogram("adze_provisioner_batch_window_seconds",
                                        "How long a provisioning batch stayed open.", buckets=DURATION_BUCKETS)

    def group(self, key: str, build: Callable[[MetricFactory], G]) -> G:
        """A provider's own families on this registry, created once (``build(factory)``) however often asked."""
        if key not in self._groups:
            self._groups[key] = build(self.factory)
        return self._groups[key]  # type: ignore[no-any-return]

    def declared(self) -> Mapping[str, Declared]:
        return dict(self.factory.declared)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def sample(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """The current value of one sample (``name`` as exposed, e.g. ``..._total``), for tests and logs."""
        return self.registry.get_sample_value(name, dict(labels or {}))
