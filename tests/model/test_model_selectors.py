"""The one label selector type: null vs empty selectors, validation, and pods' affinity/spread terms."""

from __future__ import annotations

import pytest

from reconciler.model.meta import ManifestError
from reconciler.model.pod import Pod
from reconciler.model.selectors import EVERYTHING, NOTHING, LabelExpression, LabelSelector, SelectorError


def test_null_selects_nothing_and_empty_selects_everything() -> None:
    assert LabelSelector.from_manifest(None) is NOTHING is LabelSelector.nothing()
    assert LabelSelector.from_manifest({}) == EVERYTHING == LabelSelector.everything()
    assert not NOTHING.matches({}) and not NOTHING.matches({"app": "x"})
    assert EVERYTHING.matches({}) and EVERYTHING.matches({"app": "x"})
    assert (str(NOTHING), str(EVERYTHING)) == ("<none>", "<all>")


def test_an_added_expression_never_turns_nothing_into_something() -> None:
    # Topology spread's matchLabelKeys add expressions to the pod's selector.
    narrowed = NOTHING.with_expression(LabelExpression("app", "In", frozenset({"x"})))
    assert not narrowed.matches({"app": "x"})
    assert EVERYTHING.with_expression(LabelExpression("app", "In", frozenset({"x"}))).matches({"app": "x"})


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ([], r"^spec\.selector: expected a map$"),
        ({"matchLabels": ["app"]}, r"^spec\.selector\.matchLabels: expected a map$"),
        ({"matchExpressions": [{"operator": "Exists"}]}, r"matchExpressions\[0\]\.key: required"),
        ({"matchExpressions": [{"key": "k", "operator": "In"}]}, r"matchExpressions\[0\]\.values: operator In"),
        (
            {"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["v"]}]},
            r"matchExpressions\[0\]\.values: must be empty for operator Exists",
        ),
    ],
)
def test_invalid_selectors_name_the_field(raw: object, problem: str) -> None:
    with pytest.raises(SelectorError, match=problem):
        LabelSelector.from_manifest(raw, path="spec.selector")  # type: ignore[arg-type]


def _pod(spec: dict) -> Pod:
    return Pod.from_manifest({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [], **spec}})


def test_pod_affinity_terms_keep_null_and_empty_apart() -> None:
    term = {"topologyKey": "kubernetes.io/hostname"}
    pod = _pod(
        {
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        term,  # no labelSelector: matches no pod
                        {**term, "labelSelector": {}, "namespaceSelector": {}},  # every pod, every namespace
                    ]
                }
            }
        }
    )
    null_term, empty_term = pod.anti_affinity_required
    assert not null_term.selector.matches({"app": "x"})
    assert null_term.namespace_selector is None  # null: the pod's own namespace (or the listed ones)
    assert empty_term.selector.matches({"app": "x"})
    assert empty_term.namespace_selector is not None and empty_term.namespace_selector.matches({"team": "a"})


def test_topology_spread_without_selector_counts_no_pods() -> None:
    pod = _pod({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone"}]})
    assert not pod.topology_spread[0].selector.matches({"app": "x"})


def test_bad_selector_in_a_pod_names_the_path() -> None:
    selector = {"matchExpressions": [{"key": "a", "operator": "Gt"}]}
    spread = {"maxSkew": 1, "topologyKey": "zone", "labelSelector": selector}
    with pytest.raises(ManifestError, match=r"topologySpreadConstraints\[0\]\.labelSelector\.matchExpressions\[0\]"):
        _pod({"topologySpreadConstraints": [spread]})
