"""Invalid NodePools, NodeClaims and EC2NodeClasses are rejected with a clean error naming the field.

Each case is checked twice: by the models (``parse_object``) and, where the API server
could catch it too, by the generated CRD (schema + CEL rules) — the two must agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from api_manifests import DELETE, NODEPOOL, changed

from reconciler.api import ValidationFailure, parse_object
from reconciler.api.crd_validation import validate

T = "spec.template.spec"
REQ = f"{T}.requirements"


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    manifest: dict[str, Any]
    path: str  # a reported line must start with this path
    crd_rejects: bool = True  # False where only the models (like Karpenter's controller) catch it
    message: str = ""


def np(case_id: str, path: str, value: Any, expected: str | None = None, **kw: Any) -> Case:
    return Case(case_id, changed("NodePool", path, value), expected or path, **kw)


def nc(case_id: str, path: str, value: Any, expected: str | None = None, **kw: Any) -> Case:
    return Case(case_id, changed("NodeClaim", path, value), expected or path, **kw)


def ec2(case_id: str, path: str, value: Any, expected: str | None = None, **kw: Any) -> Case:
    return Case(case_id, changed("EC2NodeClass", path, value), expected or path, **kw)


def _requirements(count: int) -> list[dict[str, Any]]:
    return [{"key": f"example.com/key-{i}", "operator": "Exists"} for i in range(count)]


TAINT = {"key": "dedicated", "value": "payments", "effect": "NoSchedule"}

CASES = [
    # --- NodePool requirements
    np("bad-operator", f"{REQ}[0].operator", "Bogus"),
    np("operator-missing", f"{REQ}[0].operator", DELETE),
    np("gt-two-values", f"{REQ}[1].values", ["2", "3"]),
    np("gt-negative", f"{REQ}[1].values", ["-1"]),
    np("gt-non-integer", f"{REQ}[1].values", ["2.5"]),
    np(
        "lt-word",
        f"{REQ}[1]",
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["many"]},
        f"{REQ}[1].values",
    ),
    np("gte-no-values", f"{REQ}[1].values", DELETE),
    np("in-empty-values", f"{REQ}[0].values", []),
    np("in-missing-values", f"{REQ}[0].values", DELETE),
    np("min-values-above-values", f"{REQ}[0].minValues", 3, message="minValues 3"),
    np("min-values-zero", f"{REQ}[0].minValues", 0),
    np("min-values-51", f"{REQ}[0].minValues", 51),
    # Integers are integers, as the API server's schema has them: YAML's true and "2" are not coerced.
    np("min-values-boolean", f"{REQ}[0].minValues", True, message="must be an integer"),
    np("min-values-string", f"{REQ}[0].minValues", "2", message="must be an integer"),
    np("key-karpenter-domain", f"{REQ}[0].key", "karpenter.sh/foo", message="restricted"),
    np("key-karpenter-subdomain", f"{REQ}[0].key", "team.karpenter.sh/foo", message="restricted"),
    np("key-nodepool", f"{REQ}[0].key", "karpenter.sh/nodepool", message="restricted"),
    np("key-hostname", f"{REQ}[0].key", "kubernetes.io/hostname", message="restricted"),
    np("key-aws-domain", f"{REQ}[0].key", "karpenter.k8s.aws/bogus", message="restricted"),
    np("key-syntax", f"{REQ}[0].key", "bad key!"),
    np("value-syntax", f"{REQ}[0].values", ["spot", "not valid"], f"{REQ}[0].values[1]"),
    np("too-many-requirements", f"{T}.requirements", _requirements(101)),
    np("requirements-missing", f"{T}.requirements", DELETE),
    # --- NodePool labels
    np(
        "label-karpenter-domain",
        "spec.template.metadata.labels",
        {"karpenter.sh/foo": "x"},
        "spec.template.metadata.labels[karpenter.sh/foo]",
    ),
    np(
        "label-nodepool",
        "spec.template.metadata.labels",
        {"karpenter.sh/nodepool": "x"},
        "spec.template.metadata.labels[karpenter.sh/nodepool]",
    ),
    np(
        "label-hostname",
        "spec.template.metadata.labels",
        {"kubernetes.io/hostname": "x"},
        "spec.template.metadata.labels[kubernetes.io/hostname]",
    ),
    np(
        "label-key-syntax",
        "spec.template.metadata.labels",
        {"bad key": "x"},
        "spec.template.metadata.labels[bad key]",
    ),
    np(
        "label-value-too-long",
        "spec.template.metadata.labels",
        {"team": "a" * 64},
        "spec.template.metadata.labels[team]",
    ),
    np(
        "label-value-syntax",
        "spec.template.metadata.labels",
        {"team": "-bad-"},
        "spec.template.metadata.labels[team]",
    ),
    np(
        "too-many-labels",
        "spec.template.metadata.labels",
        {f"l{i}": "x" for i in range(101)},
        "spec.template.metadata.labels",
    ),
    # --- durations
    np("expire-after-days", f"{T}.expireAfter", "10d"),
    np("expire-after-number", f"{T}.expireAfter", 720),
    np("termination-grace-never", f"{T}.terminationGracePeriod", "Never"),
    np("consolidate-after-words", "spec.disruption.consolidateAfter", "5 minutes"),
    # --- budgets
    np("budget-duration-seconds", "spec.disruption.budgets[1].duration", "30s"),
    np(
        "budget-schedule-without-duration",
        "spec.disruption.budgets[1]",
        {"nodes": "1", "schedule": "@daily"},
        "spec.disruption.budgets[1]",
        message="schedule and duration must be set together",
    ),
    np(
        "budget-duration-without-schedule",
        "spec.disruption.budgets[1]",
        {"nodes": "1", "duration": "1h"},
        "spec.disruption.budgets[1]",
        message="schedule and duration must be set together",
    ),
    np("budget-cron-out-of-range", "spec.disruption.budgets[1].schedule", "61 * * * *", crd_rejects=False),
    np("budget-cron-six-fields", "spec.disruption.budgets[1].schedule", "0 * * * * *"),
    np("budget-cron-every", "spec.disruption.budgets[1].schedule", "@every 1h"),
    np("budget-cron-weekday-7", "spec.disruption.budgets[1].schedule", "0 0 * * 7", crd_rejects=False),
    np(
        "budget-reason-unknown",
        "spec.disruption.budgets[0].reasons",
        ["Foo"],
        "spec.disruption.budgets[0].reasons[0]",
    ),
    np(
        "budget-reason-twice",
        "spec.disruption.budgets[0].reasons",
        ["Empty", "Empty"],
        "spec.disruption.budgets[0].reasons",
    ),
    np("budget-nodes-110-percent", "spec.disruption.budgets[0].nodes", "110%"),
    np("budget-nodes-negative", "spec.disruption.budgets[0].nodes", "-1"),
    np("too-many-budgets", "spec.disruption.budgets", [{"nodes": "1"}] * 51),
    np("consolidation-policy", "spec.disruption.consolidationPolicy", "Sometimes"),
    # --- weight, limits, static pools, unknown fields
    np("weight-zero", "spec.weight", 0),
    np("weight-101", "spec.weight", 101),
    np("weight-string", "spec.weight", "10", message="must be an integer"),
    np("limit-not-quantity", "spec.limits.cpu", "lots", "spec.limits[cpu]"),
    np("limit-boolean", "spec.limits.memory", True, "spec.limits[memory]"),
    np("static-with-cpu-limit", "spec.replicas", 2, "spec.limits"),
    np("unknown-spec-field", "spec.surprise", 1),
    np("unknown-template-field", f"{T}.surprise", 1),
    # --- taints
    np("taint-bad-effect", f"{T}.taints[0].effect", "NoScheduleEver"),
    np("taint-empty-key", f"{T}.taints[0].key", ""),
    np(
        "taint-duplicate-in-startup",
        f"{T}.startupTaints",
        [TAINT],
        f"{T}.startupTaints[0]",
        crd_rejects=False,
        message="duplicate taint",
    ),
    np(
        "taint-duplicate-in-list",
        f"{T}.taints",
        [TAINT, {**TAINT, "value": "other"}],
        f"{T}.taints[1]",
        crd_rejects=False,
    ),
    # --- nodeClassRef
    np("node-class-ref-no-name", f"{T}.nodeClassRef.name", DELETE),
    np("node-class-ref-empty-kind", f"{T}.nodeClassRef.kind", ""),
    np("node-class-ref-group-slash", f"{T}.nodeClassRef.group", "karpenter.k8s.aws/v1"),
    np("node-class-ref-missing", f"{T}.nodeClassRef", DELETE),
    # --- NodeClaim
    nc("nodeclaim-key-restricted", "spec.requirements[0].key", "karpenter.sh/foo"),
    nc("nodeclaim-no-node-class-ref", "spec.nodeClassRef", DELETE),
    nc("nodeclaim-bad-request", "spec.resources.requests.cpu", "1.5 cores", "spec.resources.requests[cpu]"),
    nc("nodeclaim-unknown-field", "spec.surprise", True),
    nc("nodeclaim-in-without-values", "spec.requirements[2].values", []),
    # --- EC2NodeClass identity and AMIs
    ec2("role-and-instance-profile", "spec.instanceProfile", "my-profile", "spec", message="exactly one of"),
    ec2("neither-role-nor-profile", "spec.role", DELETE, "spec", message="exactly one of"),
    ec2("empty-role", "spec.role", ""),
    ec2("alias-unknown-family", "spec.amiSelectorTerms[0].alias", "bogus@latest"),
    ec2("alias-without-version", "spec.amiSelectorTerms[0].alias", "al2023"),
    ec2("alias-windows-pinned", "spec.amiSelectorTerms[0].alias", "windows2022@v20240101"),
    ec2("alias-with-other-terms", "spec.amiSelectorTerms", [{"alias": "al2023@latest"}, {"id": "ami-123"}]),
    ec2("alias-with-tags", "spec.amiSelectorTerms[0]", {"alias": "al2023@latest", "tags": {"a": "b"}}),
    ec2("ami-term-empty", "spec.amiSelectorTerms[0]", {}),
    ec2("ami-terms-empty-list", "spec.amiSelectorTerms", []),
    ec2("ami-family-required", "spec.amiSelectorTerms", [{"id": "ami-123"}], "spec.amiFamily"),
    ec2("ami-family-conflicts-alias", "spec.amiFamily", "AL2"),
    ec2("ami-family-unknown", "spec.amiFamily", "Ubuntu"),
    # --- selectors
    ec2("subnet-term-empty", "spec.subnetSelectorTerms[0]", {}),
    ec2("subnet-terms-empty-list", "spec.subnetSelectorTerms", []),
    ec2("subnet-id-and-tags", "spec.subnetSelectorTerms[0]", {"id": "subnet-123", "tags": {"a": "b"}}),
    ec2("subnet-bad-id", "spec.subnetSelectorTerms[0]", {"id": "sn-123"}, "spec.subnetSelectorTerms[0].id"),
    ec2("security-group-name-and-id", "spec.securityGroupSelectorTerms[0]", {"id": "sg-123", "name": "web"}),
    ec2("selector-empty-tag-value", "spec.subnetSelectorTerms[0].tags", {"karpenter.sh/discovery": ""}),
    ec2(
        "capacity-reservation-id-and-owner",
        "spec.capacityReservationSelectorTerms",
        [{"id": "cr-123", "ownerID": "123456789012"}],
        "spec.capacityReservationSelectorTerms[0]",
    ),
    ec2("placement-group-name-and-id", "spec.placementGroupSelector", {"name": "pg", "id": "pg-123"}),
    # --- metadata options, block devices, network
    ec2(
        "http-tokens-bogus",
        "spec.metadataOptions",
        {"httpTokens": "bogus"},
        "spec.metadataOptions.httpTokens",
    ),
    ec2(
        "hop-limit-zero",
        "spec.metadataOptions",
        {"httpPutResponseHopLimit": 0},
        "spec.metadataOptions.httpPutResponseHopLimit",
    ),
    ec2(
        "hop-limit-65",
        "spec.metadataOptions",
        {"httpPutResponseHopLimit": 65},
        "spec.metadataOptions.httpPutResponseHopLimit",
    ),
    ec2(
        "volume-type-bogus",
        "spec.blockDeviceMappings",
        [{"ebs": {"volumeSize": "20Gi", "volumeType": "gp9"}}],
        "spec.blockDeviceMappings[0].ebs.volumeType",
    ),
    ec2(
        "two-root-volumes",
        "spec.blockDeviceMappings",
        [
            {"rootVolume": True, "ebs": {"volumeSize": "20Gi"}},
            {"rootVolume": True, "ebs": {"volumeSize": "30Gi"}},
        ],
        "spec.blockDeviceMappings",
    ),
    ec2(
        "volume-size-mebibytes",
        "spec.blockDeviceMappings",
        [{"ebs": {"volumeSize": "20Mi"}}],
        "spec.blockDeviceMappings[0].ebs.volumeSize",
    ),
    ec2(
        "volume-without-size-or-snapshot",
        "spec.blockDeviceMappings",
        [{"ebs": {"volumeType": "gp3"}}],
        "spec.blockDeviceMappings[0].ebs",
    ),
    ec2(
        "volume-init-rate-without-snapshot",
        "spec.blockDeviceMappings",
        [{"ebs": {"volumeSize": "20Gi", "volumeInitializationRate": 200}}],
        "spec.blockDeviceMappings[0].ebs",
    ),
    ec2(
        "iops-on-gp2",
        "spec.blockDeviceMappings",
        [{"ebs": {"volumeSize": "20Gi", "volumeType": "gp2", "iops": 3000}}],
        "spec.blockDeviceMappings[0].ebs.iops",
        crd_rejects=False,
    ),
    ec2("instance-store-raid1", "spec.instanceStorePolicy", "RAID1"),
    ec2(
        "network-without-primary",
        "spec.networkInterfaces",
        [{"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "interface"}],
        "spec.networkInterfaces",
    ),
    # --- tags
    ec2("tag-cluster-ownership", "spec.tags", {"kubernetes.io/cluster/demo": "owned"}, "spec.tags"),
    ec2("tag-nodepool", "spec.tags", {"karpenter.sh/nodepool": "x"}, "spec.tags"),
    ec2("tag-eks-cluster-name", "spec.tags", {"eks:eks-cluster-name": "demo"}, "spec.tags"),
    ec2("tag-nodeclass", "spec.tags", {"karpenter.k8s.aws/ec2nodeclass": "x"}, "spec.tags"),
    # --- kubelet
    ec2(
        "kubelet-soft-without-grace",
        "spec.kubelet",
        {"evictionSoft": {"memory.available": "5%"}},
        "spec.kubelet.evictionSoft[memory.available]",
    ),
    ec2(
        "kubelet-grace-without-soft",
        "spec.kubelet",
        {"evictionSoftGracePeriod": {"memory.available": "1m"}},
        "spec.kubelet.evictionSoftGracePeriod[memory.available]",
    ),
    ec2(
        "kubelet-image-gc-inverted",
        "spec.kubelet",
        {"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60},
        "spec.kubelet",
    ),
    ec2(
        "kubelet-reserved-bogus-key",
        "spec.kubelet",
        {"systemReserved": {"gpu": "1"}},
        "spec.kubelet.systemReserved",
    ),
    ec2(
        "kubelet-reserved-negative",
        "spec.kubelet",
        {"kubeReserved": {"cpu": "-100m"}},
        "spec.kubelet.kubeReserved",
    ),
    ec2("kubelet-max-pods-negative", "spec.kubelet", {"maxPods": -1}, "spec.kubelet.maxPods"),
    ec2(
        "kubelet-eviction-110-percent",
        "spec.kubelet",
        {"evictionHard": {"memory.available": "110%"}},
        "spec.kubelet.evictionHard[memory.available]",
    ),
    ec2(
        "kubelet-eviction-bad-signal",
        "spec.kubelet",
        {"evictionHard": {"memory.free": "5%"}},
        "spec.kubelet.evictionHard",
    ),
    ec2(
        "kubelet-cluster-dns-not-ip",
        "spec.kubelet",
        {"clusterDNS": ["kube-dns"]},
        "spec.kubelet.clusterDNS[0]",
        crd_rejects=False,
    ),
    ec2(
        "kubelet-register-with-taints",
        "spec.kubelet",
        {"registerWithTaints": []},
        "spec.kubelet.registerWithTaints",
        crd_rejects=False,
    ),
    ec2("unknown-nodeclass-field", "spec.surprise", "x"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_models_reject_with_field_path(case: Case) -> None:
    with pytest.raises(ValidationFailure) as caught:
        parse_object(case.manifest)
    text = str(caught.value)
    lines = text.splitlines()
    assert any(line.startswith(case.path) for line in lines), f"no line starts with {case.path!r}:\n{text}"
    assert case.message in text
    assert "Traceback" not in text
    assert "pydantic" not in text
    assert all(": " in line for line in lines)


CRD_CASES = [case for case in CASES if case.crd_rejects]


@pytest.mark.parametrize("case", CRD_CASES, ids=[case.id for case in CRD_CASES])
def test_crd_rejects_too(case: Case, crds: list[dict[str, Any]]) -> None:
    errors = validate(case.manifest, crds)
    assert errors, "the CRD schema/CEL rules accepted it"
    # The API server reports schema errors at the field and CEL errors where the rule sits (at or above it).
    error_paths = [error.split(": ", 1)[0] for error in errors]
    assert any(case.path.startswith(path) or path.startswith(case.path) for path in error_paths), errors


def test_table_is_large_enough() -> None:
    assert len(CASES) >= 40
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (
            {"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool", "spec": {}},
            "kind: unsupported apiVersion/kind",
        ),
        ({"apiVersion": "karpenter.sh/v1", "kind": "Provisioner"}, "kind: unsupported apiVersion/kind"),
        ({"kind": "NodePool"}, "kind: unsupported apiVersion/kind"),
    ],
)
def test_unknown_kinds_are_named(manifest: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValidationFailure, match=expected):
        parse_object(manifest)


def test_every_problem_is_reported_on_its_own_line() -> None:
    manifest = changed("NodePool", "spec.weight", 0)
    manifest["spec"]["disruption"]["consolidationPolicy"] = "Sometimes"
    with pytest.raises(ValidationFailure) as caught:
        parse_object(manifest)
    paths = sorted(problem.path for problem in caught.value.problems)
    assert paths == ["spec.disruption.consolidationPolicy", "spec.weight"]


def test_base_nodepool_is_untouched_by_cases() -> None:
    assert parse_object(NODEPOOL).spec.weight is None
