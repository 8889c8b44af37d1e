"""Karpenter's metric reference and dashboards (tests/data/karpenter, see NOTICE.md), read for the tests, and
what Adze's ``/metrics`` serves."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reconciler.cloud.aws.metrics import AWSMetrics
from reconciler.observability import Metrics
from reconciler.observability.metric_types import Declared

DATA = Path(__file__).resolve().parents[1] / "data" / "karpenter"
DASHBOARDS = ("karpenter-capacity-dashboard.json", "karpenter-performance-dashboard.json")
# Prefixes of the families Karpenter's process exports; Adze serves nothing under them that Karpenter does not.
KARPENTER_PREFIXES = ("karpenter_", "operator_", "controller_runtime_", "workqueue_", "client_go_", "aws_sdk_go_",
                      "leader_election_")

# Every metric of the reference that Adze does not serve, and why its behaviour cannot produce it.
NOT_PRODUCED = {
    "karpenter_cloudprovider_batcher_batch_time_seconds":
        "Adze's AWS provider sends each NodeClaim's CreateFleet / DescribeInstances / TerminateInstances on its own; "
        "it has no request batcher",
    "karpenter_cloudprovider_batcher_batch_size": "no request batcher (see batch_time_seconds)",
    "controller_runtime_terminal_reconcile_errors_total":
        "Adze's controllers are loops over the cluster-state cache, not controller-runtime reconcilers: a failed "
        "pass is always retried, none is terminal",
    "controller_runtime_reconcile_timeouts_total": "no per-reconciliation timeout exists to be reached",
    "controller_runtime_conversion_webhook_panics_total": "Adze serves one API version and no conversion webhook",
    "workqueue_work_duration_seconds": "the loops are woken by cache events; there is no client-go work queue",
    "workqueue_unfinished_work_seconds": "no work queue",
    "workqueue_retries_total": "no work queue",
    "workqueue_queue_duration_seconds": "no work queue",
    "workqueue_longest_running_processor_seconds": "no work queue",
    "workqueue_depth": "no work queue",
    "workqueue_adds_total": "no work queue",
    "leader_election_slowpath_total":
        "client-go's slow path (a full read when renewing its cached Lease fails) does not exist: Adze's elector "
        "reads the Lease before every renewal",
    "operator_termination_duration_seconds": "deprecated in the reference; served per kind "
                                             "(operator_<kind>_termination_duration_seconds)",
    "operator_termination_current_time_seconds": "deprecated; served per kind",
    "operator_status_condition_transitions_total": "deprecated; served per kind",
    "operator_status_condition_transition_seconds": "deprecated; served per kind",
    "operator_status_condition_current_status_seconds": "deprecated; served per kind",
    "operator_status_condition_count": "deprecated; served per kind",
}
# Served metrics whose event the end-to-end test (tests/e2e/test_e2e_live.py) does not cause, and the test that
# causes it and checks the samples.
_EVENTS = "tests/observability/test_metrics_events.py::"
_AWS = "tests/cloud/aws/test_aws_metrics.py::"
ELSEWHERE = {
    "karpenter_nodeclaims_unhealthy_disrupted_total":
        "tests/controllers/test_ctrl_health.py::test_an_unhealthy_node_is_replaced_without_a_drain_past_its_toleration",
    "karpenter_nodeclaims_instance_termination_duration_seconds":
        "tests/controllers/test_ctrl_termination_waits.py::"
        "test_the_finalizer_stays_while_the_instance_shuts_down_and_the_duration_is_measured",
    "karpenter_pods_provisioning_scheduling_undecided_time_seconds":
        _EVENTS + "test_a_pending_pod_reports_how_long_it_waits_for_a_provisioning_decision",
    "karpenter_voluntary_disruption_failed_validations_total":
        _EVENTS + "test_a_command_that_fails_validation_is_counted_by_consolidation_type",
    "karpenter_voluntary_disruption_queue_failures_total":
        _EVENTS + "test_a_replacement_that_cannot_launch_counts_a_queue_failure",
    "karpenter_consolidation_score": _EVENTS + "test_balanced_consolidation_moves_are_scored",
    "karpenter_nodepools_cost_tracker_errors_total":
        _EVENTS + "test_a_nodeclaim_without_a_known_price_is_a_cost_tracking_error_once",
    "karpenter_scheduler_unfinished_work_seconds":
        _EVENTS + "test_a_scheduling_simulation_in_progress_reports_its_unfinished_work",
    "karpenter_cloudprovider_errors_total":
        _EVENTS + "test_cloud_provider_errors_are_counted_by_controller_method_and_error_type",
    "controller_runtime_reconcile_errors_total":
        _EVENTS + "test_a_failing_controller_pass_counts_a_reconcile_error_and_a_panic",
    "controller_runtime_reconcile_panics_total":
        _EVENTS + "test_a_failing_controller_pass_counts_a_reconcile_error_and_a_panic",
    "operator_nodepool_termination_current_time_seconds":
        _EVENTS + "test_objects_deleted_with_finalizers_report_termination_time_and_duration",
    "operator_ec2nodeclass_termination_current_time_seconds":
        _EVENTS + "test_objects_deleted_with_finalizers_report_termination_time_and_duration",
    "operator_nodeclaim_termination_current_time_seconds":
        _EVENTS + "test_objects_deleted_with_finalizers_report_termination_time_and_duration",
    "operator_node_termination_current_time_seconds":
        _EVENTS + "test_objects_deleted_with_finalizers_report_termination_time_and_duration",
    "operator_node_termination_duration_seconds":
        _EVENTS + "test_objects_deleted_with_finalizers_report_termination_time_and_duration",
    "operator_ec2nodeclass_status_condition_transition_seconds":
        _EVENTS + "test_condition_transitions_report_how_long_the_previous_status_lasted",
    "operator_node_status_condition_transition_seconds":
        _EVENTS + "test_condition_transitions_report_how_long_the_previous_status_lasted",
    "karpenter_cloudprovider_instance_launch_failures_total":
        _AWS + "test_fleet_errors_count_launch_failures_by_zone_and_karpenters_reason",
    "karpenter_cloudprovider_instance_termination_failures_total":
        _AWS + "test_a_refused_termination_counts_by_zone",
    "adze_pricing_refresh_failures_total":
        "tests/cloud/aws/test_aws_pricing.py::test_on_demand_refresh_keeps_old_prices_when_a_query_comes_back_empty",
    "karpenter_interruption_received_messages_total":
        "tests/interruption/test_interruption_consumer.py::test_fuzzed_bodies_are_all_deleted_and_counted",
    "karpenter_interruption_instance_status_unhealthy_total":
        "tests/interruption/test_interruption_health.py::test_poll_deletes_forcefully_for_impaired_and_gracefully_for_events",
    "adze_interruption_actions_performed_total":
        "tests/interruption/test_interruption_health.py::test_poll_deletes_forcefully_for_impaired_and_gracefully_for_events",
}
# Series the dashboards read that no Karpenter process exports.
NOT_KARPENTERS = {"node_time_seconds": "node-exporter", "node_boot_time_seconds": "node-exporter"}
# Labels Prometheus adds to every series of a scrape target.
TARGET_LABELS = {"cluster", "job", "instance"}


def reference_names() -> list[str]:
    """Metric names of the reference, in its order (each ``### `name``` heading)."""
    return re.findall(r"^### `([a-z0-9_:]+)`", (DATA / "metrics.md").read_text(), re.M)


def reference_labels() -> dict[str, dict[str, Any]]:
    return json.loads((DATA / "metric-labels.json").read_text())["metrics"]


def served(metrics: Metrics | None = None) -> dict[str, Declared]:
    """Every family ``python -m reconciler run`` serves with the AWS cloud (whose provider registers its group)."""
    metrics = metrics or Metrics()
    AWSMetrics.of(metrics)
    return dict(metrics.declared())


def dashboard_queries() -> Iterator[tuple[str, str]]:
    """(dashboard file, PromQL) of every panel target and templating query."""
    for name in DASHBOARDS:
        yield from ((name, query) for query in _queries(json.loads((DATA / name).read_text())))


def _queries(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            elif key == "query" and isinstance(value, dict) and isinstance(value.get("query"), str):
                yield value["query"]
            elif key == "definition" and isinstance(value, str) and "(" in value:
                yield value
            else:
                yield from _queries(value)
    elif isinstance(node, list):
        for item in node:
            yield from _queries(item)


_SUFFIXES = ("_bucket", "_count", "_sum")
_SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_BARE = re.compile(r"\b([a-z][a-z0-9_]*_[a-z0-9_]+)\b")
_LABEL_VALUES = re.compile(r"label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)[^,]*,\s*([a-zA-Z_]+)\s*\)")
_PROMQL_WORDS = {"rate_interval", "sum_over_time", "histogram_quantile", "label_replace", "label_values",
                 "count_over_time", "avg_over_time", "max_over_time", "distribution_filter"}


def family(name: str, families: set[str]) -> str:
    """The family a series name belongs to (``x_bucket`` of histogram ``x``)."""
    if name in families:
        return name
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and name.removesuffix(suffix) in families:
            return name.removesuffix(suffix)
    return name


def used_metrics(query: str) -> dict[str, set[str]]:
    """Metric name -> label names a query selects or asks the values of."""
    used: dict[str, set[str]] = {}
    text = re.sub(r'"[^"]*"', '""', query)  # label values out, so they are not read as names
    for name, selector in _SELECTOR.findall(text):
        used.setdefault(name, set()).update(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", selector))
    for name, label in _LABEL_VALUES.findall(text):
        used.setdefault(name, set()).add(label)
    for name in _BARE.findall(text):
        if name.startswith(("karpenter_", "controller_runtime_", "node_")) and name not in _PROMQL_WORDS:
            used.setdefault(name, set())
    return used
