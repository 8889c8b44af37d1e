"""NodePools and EC2NodeClasses from config, and the dependency order that makes destroy leak-free."""

from __future__ import annotations

from pulumi_harness import ProgramRun, Registration

from components.nodepools import DELETE_TIMEOUT, DELETION_PROPAGATION_ANNOTATION


def node_pools(run: ProgramRun) -> dict[str, Registration]:
    return {r.inputs["metadata"]["name"]: r for r in run.k8s_objects("NodePool")}


def node_classes(run: ProgramRun) -> dict[str, Registration]:
    return {r.inputs["metadata"]["name"]: r for r in run.k8s_objects("EC2NodeClass")}


def deletion_order(run: ProgramRun) -> list[str]:
    return [r.urn for r in run.deletion_order()]


def test_node_classes_get_the_stack_role_and_discovery_selectors(dev: ProgramRun) -> None:
    default = node_classes(dev)["default"].inputs
    assert default["apiVersion"] == "karpenter.k8s.aws/v1"
    assert default["spec"]["role"] == dev.outputs["nodeRoleName"]
    selector = [{"tags": {"karpenter.sh/discovery": "adze-dev"}}]
    assert default["spec"]["subnetSelectorTerms"] == selector
    assert default["spec"]["securityGroupSelectorTerms"] == selector
    assert default["spec"]["amiSelectorTerms"] == [{"alias": "al2023@latest"}]


def test_user_fields_pass_through_unchanged(staging: ProgramRun, prod: ProgramRun) -> None:
    assert node_classes(staging)["default"].inputs["spec"]["tags"] == {"team": "platform"}
    gpu = node_pools(prod)["gpu"].inputs
    assert gpu["apiVersion"] == "karpenter.sh/v1"
    assert gpu["spec"]["template"]["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    ]
    assert gpu["spec"]["limits"] == {"nvidia.com/gpu": "16"}
    general = node_pools(prod)["general"].inputs["spec"]
    assert {
        "nodes": "0",
        "schedule": "0 13 * * mon-fri",
        "duration": "8h",
        "reasons": ["Underutilized", "Empty", "Drifted"],
    } in general["disruption"]["budgets"]


def test_each_configured_object_exists_once(prod: ProgramRun) -> None:
    assert set(node_pools(prod)) == {"general", "gpu"}
    assert set(node_classes(prod)) == {"default", "gpu"}
    assert prod.outputs["nodePoolNames"] == ["general", "gpu"]


def test_objects_are_deleted_in_the_foreground_with_time_to_drain(any_stack: ProgramRun) -> None:
    for registration in [*node_pools(any_stack).values(), *node_classes(any_stack).values()]:
        assert registration.inputs["metadata"]["annotations"][DELETION_PROPAGATION_ANNOTATION] == "foreground"
        assert registration.delete_timeout == DELETE_TIMEOUT


def test_node_pools_depend_on_their_node_class_and_on_the_running_reconciler(any_stack: ProgramRun) -> None:
    deployment = next(any_stack.k8s_objects("Deployment"))
    classes = node_classes(any_stack)
    for pool in node_pools(any_stack).values():
        node_class = classes[pool.inputs["spec"]["template"]["spec"]["nodeClassRef"]["name"]]
        assert any_stack.depends_on(pool, node_class)
        assert any_stack.depends_on(pool, deployment)
    for node_class in classes.values():
        assert any_stack.depends_on(node_class, deployment)


def test_destroy_removes_node_pools_before_the_reconciler_and_what_it_needs(any_stack: ProgramRun) -> None:
    order = deletion_order(any_stack)
    position = {urn: index for index, urn in enumerate(order)}
    last_pool_object = max(
        position[r.urn] for r in [*node_pools(any_stack).values(), *node_classes(any_stack).values()]
    )
    # Everything the reconciler needs to drain nodes and terminate instances outlives the NodePools.
    must_outlive = [
        next(any_stack.k8s_objects("Deployment")),
        *any_stack.k8s_objects("CustomResourceDefinition"),
        any_stack.one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"),
        any_stack.one("pulumi:providers:kubernetes"),
        any_stack.one("eks:index:ManagedNodeGroup"),
        any_stack.one("eks:index:Cluster"),
        *any_stack.of_type("aws:iam/policy:Policy"),
        *any_stack.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment"),
        *any_stack.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation"),
        *any_stack.of_type("aws:eks/accessEntry:AccessEntry"),
        *any_stack.of_type("aws:ec2/subnet:Subnet"),
        *any_stack.of_type("aws:ec2/natGateway:NatGateway"),
    ]
    for registration in must_outlive:
        assert position[registration.urn] > last_pool_object, registration.name


def test_metrics_server_goes_before_the_node_pools_it_runs_on(dev: ProgramRun) -> None:
    order = deletion_order(dev)
    addon = next(a for a in dev.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "metrics-server")
    assert all(order.index(addon.urn) < order.index(pool.urn) for pool in node_pools(dev).values())
