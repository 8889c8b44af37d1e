"""Stack config validation: every bad config fails with a line naming its config path."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pulumi
import pytest
import yaml
from pulumi_harness import REPO_ROOT, run_failing_program, run_program, stack_file_config

from components.config import ConfigError, load_stack_config


def base() -> dict[str, Any]:
    """A small valid config (keys without the ``adze:`` prefix, as the loader sees them)."""
    return {
        "clusterName": "adze-test",
        "network": {"mode": "create", "availabilityZones": 2},
        "nodeClasses": [{"name": "default", "amiSelectorTerms": [{"alias": "al2023@latest"}]}],
        "nodePools": [
            {
                "name": "general",
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                        "requirements": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                        ],
                    }
                },
            },
            {
                "name": "batch",
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                        "requirements": [
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
                        ],
                    }
                },
                "disruption": {"budgets": [{"nodes": "10%"}]},
            },
        ],
    }


def setter(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """``setter("nodePools[1].disruption.budgets[0].schedule", "x")``; ``value=DELETE`` removes the key."""

    def apply(config: dict[str, Any]) -> None:
        target: Any = config
        parts = path.replace("]", "").replace("[", ".").split(".")
        for part in parts[:-1]:
            target = target[int(part)] if part.isdigit() else target.setdefault(part, {})
        last = parts[-1]
        if value is DELETE:
            del target[int(last) if last.isdigit() else last]
        elif last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return apply


DELETE = object()

# (case id, mutation, expected path, fragment of the message)
BAD_CONFIGS: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    (
        "budget-schedule",
        setter("nodePools[1].disruption.budgets[0].schedule", "every day"),
        "adze:nodePools[1].disruption.budgets[0].schedule",
        "schedule",
    ),
    (
        "budget-duration-without-schedule",
        setter("nodePools[1].disruption.budgets[0].duration", "8h"),
        "adze:nodePools[1].disruption.budgets[0]",
        "schedule and duration",
    ),
    (
        "budget-nodes",
        setter("nodePools[1].disruption.budgets[0].nodes", "ten"),
        "adze:nodePools[1].disruption.budgets[0].nodes",
        "",
    ),
    (
        "consolidation-policy",
        setter("nodePools[0].disruption", {"consolidationPolicy": "Sometimes"}),
        "adze:nodePools[0].disruption.consolidationPolicy",
        "WhenEmpty",
    ),
    (
        "consolidate-after",
        setter("nodePools[0].disruption", {"consolidateAfter": "soon"}),
        "adze:nodePools[0].disruption.consolidateAfter",
        "duration",
    ),
    (
        "limits-quantity",
        setter("nodePools[0].limits", {"cpu": "lots"}),
        "adze:nodePools[0].limits[cpu]",
        "quantity",
    ),
    (
        "requirement-operator",
        setter("nodePools[0].template.spec.requirements[0].operator", "Maybe"),
        "adze:nodePools[0].template.spec.requirements[0].operator",
        "",
    ),
    (
        "taint-effect",
        setter("nodePools[0].template.spec.taints", [{"key": "gpu", "effect": "Sometimes"}]),
        "adze:nodePools[0].template.spec.taints[0].effect",
        "",
    ),
    (
        "unknown-nodepool-field",
        setter("nodePools[0].replicasCount", 3),
        "adze:nodePools[0].replicasCount",
        "unknown field",
    ),
    (
        "missing-node-class-ref",
        setter("nodePools[1].template.spec.nodeClassRef", DELETE),
        "adze:nodePools[1].template.spec.nodeClassRef",
        "missing",
    ),
    (
        "node-class-ref-to-nothing",
        setter("nodePools[0].template.spec.nodeClassRef.name", "gpu"),
        "adze:nodePools[0].template.spec.nodeClassRef.name",
        "no nodeClass named 'gpu'",
    ),
    ("nodepool-bad-name", setter("nodePools[0].name", "General_Pool"), "adze:nodePools[0].name", ""),
    ("nodepool-missing-name", setter("nodePools[0].name", DELETE), "adze:nodePools[0].name", "missing"),
    (
        "nodepool-duplicate-name",
        setter("nodePools[1].name", "general"),
        "adze:nodePools[1].name",
        "duplicate",
    ),
    ("nodepool-not-a-map", setter("nodePools[1]", "batch"), "adze:nodePools[1]", "must be a map"),
    ("nodepools-not-a-list", setter("nodePools", {"general": {}}), "adze:nodePools", "must be a list"),
    (
        "nodeclass-alias",
        setter("nodeClasses[0].amiSelectorTerms[0].alias", "ubuntu@latest"),
        "adze:nodeClasses[0].amiSelectorTerms[0].alias",
        "not supported",
    ),
    (
        "nodeclass-role-and-profile",
        setter(
            "nodeClasses[0]",
            {
                "name": "default",
                "role": "r",
                "instanceProfile": "p",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
            },
        ),
        "adze:nodeClasses[0]",
        "",
    ),
    (
        "nodeclass-restricted-tag",
        setter("nodeClasses[0].tags", {"karpenter.sh/nodepool": "x"}),
        "adze:nodeClasses[0].tags",
        "",
    ),
    (
        "nodeclass-unknown-field",
        setter("nodeClasses[0].amiFamilly", "AL2023"),
        "adze:nodeClasses[0].amiFamilly",
        "unknown field",
    ),
    ("cluster-name", setter("clusterName", "adze dev"), "adze:clusterName", "EKS cluster name"),
    ("cluster-name-missing", setter("clusterName", DELETE), "adze:clusterName", "missing"),
    ("kubernetes-version", setter("kubernetesVersion", "latest"), "adze:kubernetesVersion", "minor version"),
    ("identity-mode", setter("identityMode", "keys"), "adze:identityMode", "pod-identity"),
    (
        "deployer-role",
        setter("deployerRoleArn", "arn:aws:iam::12:user/me"),
        "adze:deployerRoleArn",
        "IAM role ARN",
    ),
    ("public-cidr", setter("publicAccessCidrs", ["10.0.0.0/33"]), "adze:publicAccessCidrs[0]", "CIDR"),
    ("log-type", setter("clusterLogTypes", ["api", "kubelet"]), "adze:clusterLogTypes[1]", ""),
    ("network-mode", setter("network.mode", "byo"), "adze:network.mode", ""),
    (
        "network-existing-without-vpc",
        setter("network", {"mode": "existing", "privateSubnetIds": []}),
        "adze:network.vpcId",
        "required when mode is existing",
    ),
    (
        "network-one-subnet",
        setter(
            "network",
            {
                "mode": "existing",
                "vpcId": "vpc-0123456789abcdef0",
                "privateSubnetIds": ["subnet-0123456789abcdef0"],
            },
        ),
        "adze:network.privateSubnetIds",
        "at least two",
    ),
    (
        "network-vpc-in-create-mode",
        setter("network.vpcId", "vpc-0123456789abcdef0"),
        "adze:network.vpcId",
        "only valid with mode: existing",
    ),
    ("network-zones", setter("network.availabilityZones", 9), "adze:network.availabilityZones", ""),
    ("network-small-cidr", setter("network.cidr", "10.0.0.0/24"), "adze:network.cidr", "too small"),
    (
        "network-subnet-id",
        setter(
            "network",
            {
                "mode": "existing",
                "vpcId": "vpc-0123456789abcdef0",
                "privateSubnetIds": ["subnet-1", "subnet-0123456789abcdef0"],
            },
        ),
        "adze:network.privateSubnetIds[0]",
        "subnet id",
    ),
    (
        "system-sizes",
        setter("systemNodeGroup", {"minSize": 3, "maxSize": 2}),
        "adze:systemNodeGroup.minSize",
        "minSize <= desiredSize <= maxSize",
    ),
    (
        "system-instance-type",
        setter("systemNodeGroup", {"instanceTypes": ["large"]}),
        "adze:systemNodeGroup.instanceTypes[0]",
        "instance type",
    ),
    (
        "system-capacity-type",
        setter("systemNodeGroup", {"capacityType": "on-demand"}),
        "adze:systemNodeGroup.capacityType",
        "ON_DEMAND",
    ),
    (
        "replicas-exceed-system-nodes",
        setter("reconciler", {"replicas": 4}),
        "adze:reconciler.replicas",
        "systemNodeGroup.maxSize",
    ),
    (
        "reconciler-reserved-setting",
        setter("reconciler", {"settings": {"CLUSTER_NAME": "x"}}),
        "adze:reconciler.settings[CLUSTER_NAME]",
        "set by the stack",
    ),
    (
        "reconciler-unknown-setting",
        setter("reconciler", {"settings": {"BATCH_SIZE": "3"}}),
        "adze:reconciler.settings[BATCH_SIZE]",
        "unknown setting",
    ),
    (
        "reconciler-bad-duration",
        setter("reconciler", {"settings": {"BATCH_IDLE_DURATION": "1 sec"}}),
        "adze:reconciler.settings[BATCH_IDLE_DURATION]",
        "duration",
    ),
    (
        "reconciler-namespace",
        setter("reconciler", {"namespace": "Adze"}),
        "adze:reconciler.namespace",
        "DNS-1123",
    ),
    (
        "reconciler-resources",
        setter("reconciler", {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}),
        "adze:reconciler.resources.requests[cpu]",
        "exceeds limit",
    ),
    (
        "reconciler-unknown-field",
        setter("reconciler", {"imageUri": "x"}),
        "adze:reconciler.imageUri",
        "unknown field",
    ),
    (
        "interruption-key-without-kms",
        setter("interruption", {"kmsKeyArn": "arn:aws:kms:us-west-2:123456789012:key/k"}),
        "adze:interruption.kmsKeyArn",
        "only valid with encryption: kms",
    ),
    (
        "interruption-encryption",
        setter("interruption", {"encryption": "none"}),
        "adze:interruption.encryption",
        "",
    ),
    ("metrics-server-without-pool", setter("nodePools", []), "adze:metricsServer", "needs a NodePool"),
    (
        "untagged-subnets-need-selectors",
        setter(
            "network",
            {
                "mode": "existing",
                "vpcId": "vpc-0123456789abcdef0",
                "privateSubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
                "tagDiscovery": False,
            },
        ),
        "adze:nodeClasses[0].subnetSelectorTerms",
        "tagDiscovery is false",
    ),
    ("unknown-key", setter("nodepools", []), "adze:nodepools", "unknown config key"),
]


def problems_for(mutate: Callable[[dict[str, Any]], None]) -> list[str]:
    config = base()
    mutate(config)
    with pytest.raises(ConfigError) as caught:
        load_stack_config(config)
    return [str(problem) for problem in caught.value.problems]


def test_the_table_is_big_enough() -> None:
    assert len(BAD_CONFIGS) >= 25
    assert len({case for case, *_ in BAD_CONFIGS}) == len(BAD_CONFIGS)


def test_the_base_config_is_valid() -> None:
    config = load_stack_config(base())
    assert [pool.name for pool in config.node_pools] == ["general", "batch"]


@pytest.mark.parametrize(("case", "mutate", "path", "fragment"), BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_names_its_path(
    case: str, mutate: Callable[[dict[str, Any]], None], path: str, fragment: str
) -> None:
    problems = problems_for(mutate)
    matching = [line for line in problems if line.startswith(f"{path}: ")]
    assert matching, f"{case}: no problem at {path}; got {problems}"
    assert any(fragment in line for line in matching), f"{case}: {matching}"


def test_all_problems_are_reported_at_once() -> None:
    def several(config: dict[str, Any]) -> None:
        setter("clusterName", "bad name")(config)
        setter("nodePools[1].disruption.budgets[0].schedule", "nope")(config)
        setter("network.availabilityZones", 1)(config)

    problems = problems_for(several)
    assert {line.split(": ")[0] for line in problems} >= {
        "adze:clusterName",
        "adze:nodePools[1].disruption.budgets[0].schedule",
        "adze:network.availabilityZones",
    }


def test_node_class_defaults_come_from_the_stack() -> None:
    config = load_stack_config(base())
    node_class = config.node_classes[0]
    selector = [{"tags": {"karpenter.sh/discovery": "adze-test"}}]
    assert node_class.spec["subnetSelectorTerms"] == selector
    assert node_class.spec["securityGroupSelectorTerms"] == selector
    assert node_class.uses_stack_role and "role" not in node_class.spec

    custom = base()
    custom["nodeClasses"][0].update(subnetSelectorTerms=[{"id": "subnet-1"}])
    node_class = load_stack_config(custom).node_classes[0]
    assert node_class.spec["subnetSelectorTerms"] == [{"id": "subnet-1"}]


@pytest.mark.parametrize("field", ["role", "instanceProfile"])
def test_a_node_class_cannot_bring_its_own_role_or_profile(field: str) -> None:
    """The controller may pass only the stack's node role to EC2 (iam:PassRole); another would fail every launch."""
    custom = base()
    custom["nodeClasses"][0][field] = "KarpenterNodeRole-legacy"
    with pytest.raises(ConfigError) as raised:
        load_stack_config(custom)
    assert [(p.path, "iam:PassRole" in p.message) for p in raised.value.problems] == [
        (f"adze:nodeClasses[0].{field}", True)
    ]


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_example_stacks_are_valid(stack: str) -> None:
    raw = {
        key.removeprefix("adze:"): value
        for key, value in stack_file_config(stack).items()
        if key.startswith("adze:")
    }
    config = load_stack_config(raw)
    assert config.node_pools


def test_prod_has_the_documented_shape() -> None:
    raw = {k.removeprefix("adze:"): v for k, v in stack_file_config("prod").items() if k.startswith("adze:")}
    config = load_stack_config(raw)
    assert config.system_node_group.capacity_type == "ON_DEMAND"
    general = next(pool for pool in config.node_pools if pool.name == "general")
    capacity = next(
        r
        for r in general.spec["template"]["spec"]["requirements"]
        if r["key"] == "karpenter.sh/capacity-type"
    )
    assert set(capacity["values"]) == {"spot", "on-demand"}
    freeze = [b for b in general.spec["disruption"]["budgets"] if b.get("schedule")]
    assert freeze == [
        {
            "nodes": "0",
            "schedule": "0 13 * * mon-fri",
            "duration": "8h",
            "reasons": ["Underutilized", "Empty", "Drifted"],
        }
    ]
    gpu = next(pool for pool in config.node_pools if pool.name == "gpu")
    assert "nvidia.com/gpu" in gpu.spec["limits"]


def test_pulumi_yaml_declares_typed_scalars_only() -> None:
    declared = yaml.safe_load((REPO_ROOT / "Pulumi.yaml").read_text())["config"]
    assert {"clusterName", "kubernetesVersion", "identityMode"} <= set(declared)
    for key, spec in declared.items():
        assert spec["type"] in ("string", "integer", "boolean", "array"), key
        if spec["type"] == "array":
            assert "items" in spec, key
    assert "nodePools" not in declared  # objects cannot be typed in Pulumi.yaml


def test_bad_nodepool_fails_the_program_before_any_resource_is_registered() -> None:
    config = {**stack_file_config("dev")}
    pools = copy.deepcopy(config["adze:nodePools"])
    pools.append(copy.deepcopy(pools[0]) | {"name": "batch"})
    pools[1]["disruption"] = {
        "budgets": [
            {"nodes": "1", "schedule": "25 * * * *", "duration": "1h"},
            {"nodes": "0", "schedule": "whenever", "duration": "1h"},
        ]
    }
    config["adze:nodePools"] = pools
    config["adze:nodepool"] = []  # a typo of a key is reported too
    error, run = run_failing_program(config)
    assert isinstance(error, pulumi.RunError)
    message = str(error)
    assert "adze:nodePools[1].disruption.budgets[1].schedule: " in message
    assert "adze:nodepool: unknown config key" in message
    assert "Traceback" not in message
    assert run.registrations == []


def test_a_valid_config_does_register_resources() -> None:
    # The counterpart of the test above: the same harness does see registrations.
    assert run_program(stack_file_config("dev")).registrations


def test_the_deploying_guide_example_is_a_valid_config() -> None:
    guide = (REPO_ROOT / "docs" / "deploying.md").read_text()
    block = next(b for b in guide.split("```yaml\n")[1:] if b.startswith("config:")).split("```")[0]
    raw = {key.removeprefix("adze:"): value for key, value in yaml.safe_load(block)["config"].items()}
    config = load_stack_config({"clusterName": "adze-docs", **raw})
    assert [pool.name for pool in config.node_pools] == ["batch"]
    documented_error = (
        "adze:nodePools[1].disruption.budgets[0].schedule: schedule '0 25 * * *': hour value '25'"
    )
    assert documented_error in guide
    broken = base()
    setter("nodePools[1].disruption.budgets[0]", {"nodes": "1", "schedule": "0 25 * * *", "duration": "1h"})(
        broken
    )
    assert any(line.startswith(documented_error) for line in problems_for(lambda c: c.update(broken)))
