"""The reconciler component: image, CRDs, RBAC, Deployment, PDB and metrics Service."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pulumi_harness import REPO_ROOT, ProgramRun, Registration, run_stack

from components.common import LEADER_ELECTION_LEASE, SERVICE_ACCOUNT_NAME, SYSTEM_NODE_LABEL
from components.rbac import cluster_role_rules, leader_election_rules, writes_outside_own_api
from reconciler.api.crds import generate_crds


def deployment(run: ProgramRun) -> Registration:
    found = list(run.k8s_objects("Deployment"))
    assert len(found) == 1
    return found[0]


def pod(run: ProgramRun) -> dict[str, Any]:
    return deployment(run).inputs["spec"]["template"]["spec"]


def env(run: ProgramRun) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod(run)["containers"][0]["env"]}


def test_deployment_runs_two_replicas_as_a_critical_pod_on_system_nodes_only(prod: ProgramRun) -> None:
    spec = deployment(prod).inputs["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}
    template = spec["template"]["spec"]
    assert template["priorityClassName"] == "system-cluster-critical"
    terms = template["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"},
                {"key": SYSTEM_NODE_LABEL, "operator": "In", "values": ["system"]},
            ]
        }
    ]
    assert template["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    anti = template["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
    assert anti[0]["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    spread = template["topologySpreadConstraints"][0]
    assert (spread["topologyKey"], spread["maxSkew"], spread["whenUnsatisfiable"]) == (
        "topology.kubernetes.io/zone",
        1,
        "DoNotSchedule",
    )


def test_pod_is_non_root_with_a_read_only_root_and_no_capabilities(any_stack: ProgramRun) -> None:
    template = pod(any_stack)
    assert template["securityContext"]["runAsNonRoot"] is True
    assert template["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = template["containers"][0]["securityContext"]
    assert container["readOnlyRootFilesystem"] is True
    assert container["allowPrivilegeEscalation"] is False
    assert container["privileged"] is False
    assert container["capabilities"] == {"drop": ["ALL"]}
    assert container["runAsUser"] != 0
    # Python still needs a writable /tmp.
    assert template["containers"][0]["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]


def test_probes_and_ports(dev: ProgramRun) -> None:
    container = pod(dev)["containers"][0]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"http-metrics": 8080, "http": 8081}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["command"] == ["python", "-m", "reconciler"] and container["args"] == ["run"]


def test_environment_carries_the_cluster_settings(dev: ProgramRun) -> None:
    values = env(dev)
    assert values["CLUSTER_NAME"] == "adze-dev"
    assert values["CLUSTER_ENDPOINT"] == "https://EXAMPLE.gr7.us-west-2.eks.amazonaws.com"
    assert values["INTERRUPTION_QUEUE"] == dev.outputs["interruptionQueueName"]
    assert values["AWS_REGION"] == "us-west-2"
    assert values["LOG_LEVEL"] == "debug"
    assert values["BATCH_IDLE_DURATION"] == "1s" and values["BATCH_MAX_DURATION"] == "10s"
    assert values["METRICS_PORT"] == "8080" and values["HEALTH_PROBE_PORT"] == "8081"
    assert values["LEADER_ELECTION_NAME"] == LEADER_ELECTION_LEASE
    assert values["SYSTEM_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


def test_environment_is_what_the_reconciler_settings_accept(any_stack: ProgramRun) -> None:
    from reconciler.settings import Settings

    plain = {name: value for name, value in env(any_stack).items() if isinstance(value, str)}
    settings = Settings.from_env(plain)
    assert settings.cluster_name == any_stack.outputs["clusterName"]
    assert settings.metrics_port == 8080 and settings.health_probe_port == 8081


def test_resources_come_from_config(prod: ProgramRun) -> None:
    assert pod(prod)["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"memory": "1Gi"},
    }


def test_pdb_and_metrics_service(dev: ProgramRun) -> None:
    pdb = dev.one("kubernetes:policy/v1:PodDisruptionBudget").inputs["spec"]
    selector = deployment(dev).inputs["spec"]["selector"]
    assert pdb == {"maxUnavailable": 1, "selector": selector}
    service = dev.one("kubernetes:core/v1:Service").inputs
    assert service["spec"]["ports"] == [
        {"name": "http-metrics", "port": 8080, "targetPort": "http-metrics", "protocol": "TCP"}
    ]
    assert service["spec"]["selector"] == selector["matchLabels"]
    assert service["metadata"]["namespace"] == "adze"


def test_crds_are_the_reconcilers_own(dev: ProgramRun) -> None:
    recorded = {r.inputs["metadata"]["name"]: r.inputs for r in dev.k8s_objects("CustomResourceDefinition")}
    expected = {crd["metadata"]["name"]: crd for crd in generate_crds()}
    assert (
        set(recorded)
        == set(expected)
        == {
            "nodepools.karpenter.sh",
            "nodeclaims.karpenter.sh",
            "ec2nodeclasses.karpenter.k8s.aws",
            "nodeoverlays.karpenter.sh",
        }
    )
    for name, crd in expected.items():
        assert recorded[name]["spec"]["group"] == crd["spec"]["group"]
        assert recorded[name]["spec"]["names"] == crd["spec"]["names"]
        assert [v["name"] for v in recorded[name]["spec"]["versions"]] == [
            v["name"] for v in crd["spec"]["versions"]
        ]


def test_rbac_is_bound_to_the_service_account(dev: ProgramRun) -> None:
    cluster_role = dev.one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole").inputs
    assert cluster_role["rules"] == cluster_role_rules()
    binding = dev.one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding").inputs
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT_NAME, "namespace": "adze"}
    ]
    role = dev.one("kubernetes:rbac.authorization.k8s.io/v1:Role", "leader-election").inputs
    assert role["metadata"]["namespace"] == "adze"
    assert role["rules"] == leader_election_rules(LEADER_ELECTION_LEASE)
    dns = dev.one("kubernetes:rbac.authorization.k8s.io/v1:Role", "-dns").inputs
    assert dns["metadata"]["namespace"] == "kube-system"
    assert dns["rules"] == [
        {"apiGroups": [""], "resources": ["services"], "verbs": ["get"], "resourceNames": ["kube-dns"]}
    ]
    dns_binding = dev.one("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "-dns").inputs
    assert dns_binding["metadata"]["namespace"] == "kube-system"
    assert dns_binding["roleRef"]["name"] == "adze-dns"
    assert dns_binding["subjects"] == [
        {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT_NAME, "namespace": "adze"}
    ]
    assert pod(dev)["serviceAccountName"] == SERVICE_ACCOUNT_NAME


def test_rbac_is_least_privilege() -> None:
    rules = cluster_role_rules()
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
    # Outside its own API groups, the reconciler writes only these.
    assert writes_outside_own_api(rules) == [
        ("", "events", "create"),
        ("", "events", "patch"),
        ("", "nodes", "create"),
        ("", "nodes", "delete"),
        ("", "nodes", "patch"),
        ("", "pods", "delete"),
        ("", "pods/eviction", "create"),
    ]
    granted = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}
    assert ("", "secrets") not in granted and ("", "configmaps") not in granted
    lease_rules = leader_election_rules("adze-leader-election")
    assert lease_rules[1]["resourceNames"] == ["adze-leader-election"]
    assert "create" not in lease_rules[1]["verbs"]


def test_pod_identity_needs_no_service_account_annotation_but_irsa_does(
    dev: ProgramRun, staging: ProgramRun
) -> None:
    assert dev.one("kubernetes:core/v1:ServiceAccount").inputs["metadata"]["annotations"] == {}
    annotations = staging.one("kubernetes:core/v1:ServiceAccount").inputs["metadata"]["annotations"]
    assert annotations == {"eks.amazonaws.com/role-arn": staging.outputs["controllerRoleArn"]}


def test_deployment_starts_only_after_its_credentials_permissions_crds_and_nodes(
    any_stack: ProgramRun,
) -> None:
    deploy = deployment(any_stack)
    controller_role = any_stack.one_named(
        "aws:iam/role:Role", any_stack.outputs["clusterName"] + "-controller"
    )
    controller_attachments = [
        a
        for a in any_stack.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.inputs["role"] == controller_role.id.removesuffix("-id")
    ]
    assert len(controller_attachments) == 5
    needed = [
        *controller_attachments,
        *any_stack.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation"),
        *any_stack.k8s_objects("CustomResourceDefinition"),
        any_stack.one("eks:index:ManagedNodeGroup"),
        any_stack.one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"),
        any_stack.one("kubernetes:core/v1:ServiceAccount"),
    ]
    for dependency in needed:
        assert any_stack.depends_on(deploy, dependency), dependency.name


def test_image_is_built_from_the_repository_and_pushed_to_an_immutable_scanned_repository(
    dev: ProgramRun,
) -> None:
    repository = dev.one("aws:ecr/repository:Repository").inputs
    assert repository["imageTagMutability"] == "IMMUTABLE"
    assert repository["imageScanningConfiguration"] == {"scanOnPush": True}
    image = dev.one("docker-build:index:Image").inputs
    assert image["push"] is True
    assert image["context"] == {"location": str(REPO_ROOT)}
    assert image["dockerfile"] == {"location": str(REPO_ROOT / "reconciler" / "Dockerfile")}
    assert image["platforms"] == ["linux/amd64"]
    repository_name = dev.one("aws:ecr/repository:Repository").id.removesuffix("-id")
    # The tag names the build context and platform (tests/components/test_build_context.py).
    [tag] = image["tags"]
    repository, _, version = tag.partition(":")
    assert repository == f"123456789012.dkr.ecr.us-west-2.amazonaws.com/{repository_name}"
    assert re.fullmatch(r"src-[0-9a-f]{20}", version)
    assert pod(dev)["containers"][0]["image"] == dev.outputs["reconcilerImage"]
    assert "@sha256:" in dev.outputs["reconcilerImage"]


def test_arm64_system_nodes_get_an_arm64_image(staging: ProgramRun) -> None:
    assert staging.one("docker-build:index:Image").inputs["platforms"] == ["linux/arm64"]


def test_a_configured_image_skips_the_build() -> None:
    image = "public.ecr.aws/example/adze:1.2.3"
    run = run_stack("dev", **{"adze:reconciler": {"image": image, "namespace": "kube-system"}})
    assert not run.of_type("aws:ecr/repository:Repository")
    assert not run.of_type("docker-build:index:Image")
    assert pod(run)["containers"][0]["image"] == image
    # kube-system exists already: the stack neither creates nor deletes it.
    assert not run.of_type("kubernetes:core/v1:Namespace")
    assert deployment(run).inputs["metadata"]["namespace"] == "kube-system"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_namespace_is_created_for_the_reconciler(stack: str, dev: ProgramRun, prod: ProgramRun) -> None:
    run = {"dev": dev, "prod": prod}[stack]
    namespace = run.one("kubernetes:core/v1:Namespace").inputs["metadata"]["name"]
    assert namespace == "adze"
