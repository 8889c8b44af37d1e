"""``/metrics`` against Karpenter's metric reference (v1.14) and its published Grafana dashboards.

The reference (tests/data/karpenter/metrics.md) is parsed for names; their types and label names come from
metric-labels.json, read from the Go declarations. Every reference metric is either served with the same
name, type and label names, or listed in ``NOT_PRODUCED`` with why Adze's behaviour cannot produce it.
"""

from __future__ import annotations

import pytest
from karpenter_reference import (
    KARPENTER_PREFIXES,
    NOT_KARPENTERS,
    NOT_PRODUCED,
    TARGET_LABELS,
    dashboard_queries,
    family,
    reference_labels,
    reference_names,
    served,
    used_metrics,
)

from reconciler.observability import Metrics


def test_the_reference_data_describes_every_documented_metric_once() -> None:
    names = reference_names()
    assert len(names) == len(set(names)) == 126  # what the v1.14 page documents, all prefixes
    assert len([n for n in names if n.startswith("karpenter_")]) == 71
    assert set(reference_labels()) == set(names)


def test_every_reference_metric_is_served_with_karpenters_type_and_labels_or_named_as_not_produced() -> None:
    reference, families = reference_labels(), served()
    missing, wrong = [], []
    for name in reference_names():
        if name in NOT_PRODUCED:
            assert name not in families, f"{name} is served but listed as not produced"
            continue
        if name not in families:
            missing.append(name)
            continue
        expected = (reference[name]["type"], sorted(reference[name]["labels"]))
        actual = (families[name].kind, sorted(families[name].labels))
        if actual != expected:
            wrong.append(f"{name}: served {actual}, Karpenter {expected}")
    assert not missing, f"not served: {missing}"
    assert not wrong, "\n".join(wrong)


def test_every_not_produced_entry_is_a_reference_metric_with_a_reason() -> None:
    names = set(reference_names())
    for name, reason in NOT_PRODUCED.items():
        assert name in names, name
        assert len(reason) > 10, name


def test_nothing_is_served_under_karpenters_prefixes_that_karpenter_does_not_document() -> None:
    names = set(reference_names())
    for name in served():
        if name.startswith(KARPENTER_PREFIXES):
            assert name in names, f"{name}: a Karpenter-style name Karpenter does not have (use adze_)"
        else:
            assert name.startswith("adze_"), name


def test_the_exposition_carries_every_declared_family_and_the_process_collectors() -> None:
    metrics = Metrics()
    families = served(metrics)
    text = metrics.render().decode()
    for name, declared in families.items():
        assert f"# TYPE {name} {declared.kind}" in text, name
    for collector_metric in ("process_cpu_seconds_total", "process_resident_memory_bytes", "python_info",
                             "python_gc_collections_total"):
        assert collector_metric in text, collector_metric


@pytest.mark.parametrize("dashboard_query", list(dashboard_queries()), ids=lambda q: q[1][:60])
def test_every_metric_of_karpenters_dashboards_is_served_with_the_labels_they_select(
        dashboard_query: tuple[str, str]) -> None:
    dashboard, query = dashboard_query
    families = served()
    for name, labels in used_metrics(query).items():
        if name in NOT_KARPENTERS:
            continue
        name = family(name, set(families))
        assert name in families, f"{dashboard}: {name} (in {query!r}) is not served"
        unknown = labels - set(families[name].labels) - TARGET_LABELS - {"quantile", "le"}
        assert not unknown, f"{dashboard}: {name} has no label {sorted(unknown)} (in {query!r})"


def test_the_dashboards_use_the_metrics_a_reader_expects() -> None:
    """The parser finds them all (a query it could not read would pass the test above vacuously)."""
    used = {name for _, query in dashboard_queries() for name in used_metrics(query)}
    assert {"karpenter_nodes_allocatable", "karpenter_nodes_total_pod_requests", "karpenter_pods_state",
            "karpenter_nodepools_usage", "karpenter_nodepools_limit", "karpenter_nodes_termination_duration_seconds",
            "karpenter_pods_startup_duration_seconds", "controller_runtime_reconcile_time_seconds_bucket",
            "controller_runtime_reconcile_total", "karpenter_voluntary_disruption_decisions_total"} <= used
