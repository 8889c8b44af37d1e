"""The support registry: every CRD field, feature gate and setting of Karpenter v1.14 is implemented (with the
behaviour test that proves it) or unsupported (with the line a user sees), and the docs match it."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from reconciler.api.support import FEATURE_GATES, FIELDS, IMPLEMENTED, SETTINGS, UNSUPPORTED, Support
from reconciler.api.support_check import entry_for, schema_paths, support_matrix_markdown, unsupported_fields

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "karpenter-compatibility.md"
START, END = "<!-- support-matrix:start -->", "<!-- support-matrix:end -->"

# kubernetes-sigs/karpenter v1.14.1 pkg/operator/options/options.go: FeatureGates and env.WithDefault* names.
UPSTREAM_GATES = {"NodeRepair": False, "ReservedCapacity": True, "SpotToSpotConsolidation": False,
                  "NodeOverlay": False, "StaticCapacity": False, "CapacityBuffer": False}
UPSTREAM_CORE_SETTINGS = {
    "KARPENTER_SERVICE", "METRICS_PORT", "HEALTH_PROBE_PORT", "KUBE_CLIENT_QPS", "KUBE_CLIENT_BURST",
    "ENABLE_PROFILING", "DISABLE_CONTROLLER_WARMUP", "DISABLE_LEADER_ELECTION", "DISABLE_CLUSTER_STATE_OBSERVABILITY",
    "LEADER_ELECTION_NAME", "LEADER_ELECTION_NAMESPACE", "MEMORY_LIMIT", "CPU_REQUESTS", "LOG_LEVEL",
    "LOG_OUTPUT_PATHS", "LOG_ERROR_OUTPUT_PATHS", "BATCH_MAX_DURATION", "BATCH_IDLE_DURATION", "PREFERENCE_POLICY",
    "MIN_VALUES_POLICY", "IGNORE_DRA_REQUESTS", "FEATURE_GATES",
}
# aws/karpenter-provider-aws v1.14.1 pkg/operator/options/options.go.
UPSTREAM_AWS_SETTINGS = {
    "CLUSTER_CA_BUNDLE", "CLUSTER_NAME", "CLUSTER_ENDPOINT", "ISOLATED_VPC", "EKS_CONTROL_PLANE",
    "VM_MEMORY_OVERHEAD_PERCENT", "INTERRUPTION_QUEUE", "RESERVED_ENIS", "DISABLE_DRY_RUN", "ENABLE_ZONAL_SHIFT",
    "AMI_REFRESH_INTERVAL", "SUBNET_REFRESH_INTERVAL",
}


def assert_described(what: str, support: Support) -> None:
    """Implemented: the named behaviour test exists. Unsupported: a one-line message for the user."""
    assert support.status in (IMPLEMENTED, UNSUPPORTED), what
    if support.status == IMPLEMENTED:
        file, _, test = support.proof.partition("::")
        path = REPO / file
        assert path.is_file(), f"{what}: proof {support.proof} names no test file"
        assert re.search(rf"^(async )?def {re.escape(test)}\(", path.read_text(), re.M), \
            f"{what}: proof {support.proof} names no test"
    else:
        assert support.message and "\n" not in support.message and len(support.message) <= 200, what


@pytest.mark.parametrize("kind", list(FIELDS))
def test_every_crd_field_is_registered_and_every_entry_is_a_field(kind: str) -> None:
    paths = schema_paths(kind)
    assert len(paths) > (12 if kind == "NodeOverlay" else 25)  # the walk found the schema, not a stub
    missing = [path for path in paths if entry_for(kind, path) is None]
    assert not missing, f"{kind} fields not in reconciler/api/support.py: {missing}"
    used = {entry_for(kind, path)[0] for path in paths}  # type: ignore[index]
    assert set(FIELDS[kind]) == used, f"{kind} entries matching no field: {set(FIELDS[kind]) - used}"
    for entry, support in FIELDS[kind].items():
        assert_described(f"{kind} {entry}", support)


def test_a_new_field_fails_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk reads the generated schemas: a field added to a model and not registered has no entry."""
    import reconciler.api.support_check as check

    schemas = copy.deepcopy(check._schemas())
    schemas["NodePool"]["properties"]["spec"]["properties"]["shinyNewField"] = {"type": "string"}
    monkeypatch.setattr(check, "_schemas", lambda: schemas)
    assert "spec.shinyNewField" in schema_paths("NodePool") and entry_for("NodePool", "spec.shinyNewField") is None


def test_every_feature_gate_of_karpenter_is_registered_with_its_default() -> None:
    assert {name: gate.upstream_default for name, gate in FEATURE_GATES.items()} == UPSTREAM_GATES
    for name, gate in FEATURE_GATES.items():
        assert_described(f"gate {name}", gate.support)


def test_every_setting_of_karpenter_is_registered() -> None:
    assert set(SETTINGS) >= UPSTREAM_CORE_SETTINGS | UPSTREAM_AWS_SETTINGS
    for name, setting in SETTINGS.items():
        assert_described(f"setting {name}", setting.support)
        if setting.support.status == UNSUPPORTED:
            assert setting.honoured is None or setting.honoured, f"{name}: unsupported, yet no value is accepted"


NODECLASS = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "c"},
             "spec": {"amiSelectorTerms": [{"alias": "bottlerocket@latest"}], "role": "r",
                      "subnetSelectorTerms": [{"id": "s"}], "securityGroupSelectorTerms": [{"id": "g"}]}}
NODEPOOL = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
            "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {"name": "c"}}}}}
OVERLAY = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "x"}, "spec": {}}
BASES = {"EC2NodeClass": NODECLASS, "NodePool": NODEPOOL, "NodeOverlay": OVERLAY}


def _set(manifest: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    node = manifest
    parts = [p for p in path.replace("[]", "[].").split(".") if p]
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part.endswith("[]"):
            items = node.setdefault(part[:-2], [{}])
            node = items[0]
        elif last:
            node[part] = value
        else:
            node = node.setdefault(part, {})
    return manifest


@pytest.mark.parametrize(("kind", "path"), [
    (kind, path) for kind, registry in FIELDS.items() for path, support in registry.items()
    if path.startswith("spec.") and (support.status == UNSUPPORTED or support.gate)
])
def test_every_unsupported_or_gated_field_is_reported_when_set(kind: str, path: str) -> None:
    support = FIELDS[kind][path]
    value: Any = "x"
    if path == "spec.kubelet":
        path, value = "spec.kubelet.systemReserved", {"cpu": "100m"}
    manifest = _set(copy.deepcopy(BASES[kind]), path, value)
    # A gated field is reported while its gate is off (whatever Karpenter's default for the gate).
    (finding,) = unsupported_fields(manifest, {support.gate: False} if support.gate else None)
    assert finding.path in path and finding.kind == kind and finding.message
    if support.gate:
        assert unsupported_fields(manifest, {support.gate: True}) == []


def test_kubelet_settings_a_family_would_drop_are_reported_the_ones_it_renders_are_not() -> None:
    rendered = {"maxPods": 110, "systemReserved": {"cpu": "100m"}, "evictionHard": {"memory.available": "5%"}}
    bottlerocket = _set(copy.deepcopy(NODECLASS), "spec.kubelet", rendered)
    assert unsupported_fields(bottlerocket) == []  # every family renders Karpenter's kubelet fields
    dropped = _set(copy.deepcopy(NODECLASS), "spec.kubelet", {"podsPerCore": 4})
    (finding,) = unsupported_fields(dropped)
    assert finding.path == "spec.kubelet" and "podsPerCore" in finding.message and "Bottlerocket" in finding.message
    al2023 = copy.deepcopy(dropped)
    al2023["spec"]["amiSelectorTerms"] = [{"alias": "al2023@latest"}]
    assert unsupported_fields(al2023) == []  # nodeadm passes any kubelet field through


def test_the_compatibility_doc_carries_the_generated_matrix() -> None:
    text = DOC.read_text()
    assert START in text and END in text
    between = text.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"
    assert between == support_matrix_markdown(), (
        "docs/karpenter-compatibility.md is out of date: run python scripts/support_matrix.py")
