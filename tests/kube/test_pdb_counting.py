"""PodDisruptionBudgets counted as Kubernetes counts them (``model.pdb_status``) and enforced by the in-memory
Eviction API (``kube.memory_eviction``): expected pods from the controllers' scale, unmanaged pods, controllers
without scale, the budget's observed status, rounding, ``unhealthyPodEvictionPolicy`` and two budgets.

The objects are shaped as ``kubectl get -o yaml`` shows them: a Deployment, the ReplicaSet it owns (with
``pod-template-hash``) and pods owned by that ReplicaSet, all with uids.
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.kube.api import ApiError, TooManyRequestsError
from reconciler.kube.memory import MemoryKube
from reconciler.model.pdb_status import budget_status

NS = "shop"


def deployment(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-deploy-{name}"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}}}


def replicaset(name: str, replicas: int, deployment_name: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-rs-{name}"}
    if deployment_name:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment_name,
                                        "uid": f"uid-deploy-{deployment_name}", "controller": True}]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": metadata, "spec": {"replicas": replicas}}


def statefulset(name: str, replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-sts-{name}"}, "spec": {"replicas": replicas}}


def pod(name: str, *, app: str = "web", owner: tuple[str, str, str] | None = None, ready: bool = True,
        phase: str = "Running") -> dict[str, Any]:
    """``owner``: (apiVersion, kind, name) of the controller, uid as the factories above give it."""
    metadata: dict[str, Any] = {"name": name, "namespace": NS, "labels": {"app": app}}
    if owner is not None:
        api_version, kind, owner_name = owner
        prefix = {"ReplicaSet": "rs", "StatefulSet": "sts", "Deployment": "deploy"}.get(kind, kind.lower())
        metadata["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": owner_name,
                                        "uid": f"uid-{prefix}-{owner_name}", "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"nodeName": "n1"},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def budget(name: str = "web", app: str = "web", status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                "metadata": {"name": name, "namespace": NS},
                                "spec": {"selector": {"matchLabels": {"app": app}}, **spec}}
    if status is not None:
        manifest["status"] = status
    return manifest


def web_deployment(replicas: int, running: int, rs_replicas: int | None = None) -> list[dict[str, Any]]:
    """A Deployment ``web`` of ``replicas`` through ReplicaSet ``web-7d4b9c``, with ``running`` pods."""
    rs = replicaset("web-7d4b9c", replicas if rs_replicas is None else rs_replicas, "web")
    pods = [pod(f"web-7d4b9c-{i:05d}", owner=("apps/v1", "ReplicaSet", "web-7d4b9c")) for i in range(running)]
    return [deployment("web", replicas), rs, *pods]


def loaded(*objects: dict[str, Any]) -> MemoryKube:
    kube = MemoryKube()
    kube.load(list(objects))
    return kube


def status_of(kube: MemoryKube, pdb: dict[str, Any]) -> tuple[int, int, int, int]:
    found = kube.pdb_status(pdb)
    return found.expected_pods, found.desired_healthy, found.current_healthy, found.disruptions_allowed


# -- the disruption controller's counts -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "counts"),
    [
        # (expected, desired healthy, healthy, disruptions allowed) for a Deployment of 6 with 6 Ready pods
        ({"maxUnavailable": 1}, (6, 5, 6, 1)),
        ({"maxUnavailable": 2}, (6, 4, 6, 2)),
        ({"maxUnavailable": "25%"}, (6, 4, 6, 2)),  # ceil(1.5) = 2 unavailable
        ({"maxUnavailable": "10%"}, (6, 5, 6, 1)),  # ceil(0.6) = 1
        ({"maxUnavailable": "0%"}, (6, 6, 6, 0)),
        ({"maxUnavailable": 0}, (6, 6, 6, 0)),
        ({"minAvailable": 4}, (6, 4, 6, 2)),
        ({"minAvailable": "50%"}, (6, 3, 6, 3)),
        ({"minAvailable": "60%"}, (6, 4, 6, 2)),  # ceil(3.6) = 4 desired
        ({"minAvailable": "100%"}, (6, 6, 6, 0)),
        ({}, (0, 0, 6, 0)),  # neither field: the controller expects nothing and allows nothing
    ],
)
def test_every_budget_form_over_a_deployment(spec: dict[str, Any], counts: tuple[int, int, int, int]) -> None:
    pdb = budget(**spec)
    assert status_of(loaded(*web_deployment(6, 6), pdb), pdb) == counts


def test_expected_pods_come_from_the_deployments_scale_not_the_pods_left() -> None:
    """Two pods are gone (evicted, not yet back): a maxUnavailable budget still expects 6, so it has no room;
    an integer minAvailable counts the pods there are."""
    kube = loaded(*web_deployment(6, 4))
    assert status_of(kube, budget(maxUnavailable=1)) == (6, 5, 4, 0)
    assert status_of(kube, budget(minAvailable=3)) == (4, 3, 4, 1)
    # The Deployment's scale wins over its ReplicaSet's (mid-rollout or being scaled).
    assert status_of(loaded(*web_deployment(6, 6, rs_replicas=3)), budget(maxUnavailable=1))[0] == 6


def test_other_controllers_and_pods_without_one() -> None:
    objects = [
        replicaset("bare-rs", 3),
        statefulset("db", 4),
        *[pod(f"bare-rs-{i}", owner=("apps/v1", "ReplicaSet", "bare-rs")) for i in range(3)],
        *[pod(f"db-{i}", owner=("apps/v1", "StatefulSet", "db")) for i in range(4)],
        pod("loner"),
    ]
    kube = loaded(*objects)
    # A ReplicaSet no Deployment controls and a StatefulSet, summed; the unmanaged pod is left out.
    assert status_of(kube, budget(app="web", maxUnavailable=1)) == (7, 6, 8, 2)
    alone = loaded(pod("a"), pod("b"), pod("c"))
    for spec in ({"maxUnavailable": 1}, {"maxUnavailable": "50%"}, {"minAvailable": "50%"}):
        found = alone.pdb_status(budget(**spec))
        assert (found.expected_pods, found.disruptions_allowed, found.unmanaged) == (0, 0, ("a", "b", "c"))
    assert status_of(alone, budget(minAvailable=2)) == (3, 2, 3, 1)  # an integer counts the pods themselves


@pytest.mark.parametrize(
    ("owner", "resource"),
    [(("batch/v1", "Job", "nightly"), "jobs.batch"), (("apps/v1", "DaemonSet", "agent"), "daemonsets.apps"),
     (("v1", "Node", "ip-10-0-1-2"), "nodes")],
)
def test_pods_of_controllers_without_scale_fail_the_count(owner: tuple[str, str, str], resource: str) -> None:
    kube = loaded(pod("a", owner=owner), pod("b", owner=owner))
    found = kube.pdb_status(budget(maxUnavailable=1))
    assert found.failure == f"{resource} does not implement the scale subresource"
    assert found.disruptions_allowed == 0
    assert status_of(kube, budget(minAvailable=1)) == (2, 1, 2, 1)  # an integer minAvailable still works


def test_a_controller_not_stored_uses_the_budgets_observed_status() -> None:
    """A dump of pods and budgets without their Deployments: the status the real controller wrote
    (``expectedPods``) stands in for the missing scale; without one the count fails as upstream's does."""
    pods = [pod(f"web-x-{i}", owner=("apps/v1", "ReplicaSet", "web-x")) for i in range(3)]
    observed = {"expectedPods": 4, "desiredHealthy": 3, "currentHealthy": 4, "disruptionsAllowed": 1,
                "observedGeneration": 1}
    kube = loaded(*pods)
    found = kube.pdb_status(budget(maxUnavailable=1, status=observed))
    assert (found.expected_pods, found.desired_healthy, found.current_healthy, found.observed) == (4, 3, 3, True)
    assert found.disruptions_allowed == 0  # one of the 4 expected is missing now
    missing = kube.pdb_status(budget(maxUnavailable=1))
    assert missing.failure == "found no controllers for pod 'web-x-0'"
    stale = {**observed}
    outdated = budget(maxUnavailable=1, status=stale)
    outdated["metadata"]["generation"] = 2  # the status describes an older spec
    assert kube.pdb_status(outdated).failure
    # A ReplicaSet of another uid (deleted and recreated) is not the pods' controller.
    wrong = loaded(*pods, {**replicaset("web-x", 3), "metadata": {"name": "web-x", "namespace": NS, "uid": "other"}})
    assert wrong.pdb_status(budget(maxUnavailable=1)).failure == "found no controllers for pod 'web-x-0'"


def test_the_count_is_the_same_function_the_engine_and_the_terminator_use() -> None:
    """``budget_status`` over plain lists (what ``model.pdb`` computes from a ClusterState) agrees with
    the in-memory API server's."""
    objects = web_deployment(6, 5)
    stored = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    pods = [o for o in objects if o["kind"] == "Pod"]

    def lookup(kind: str, group: str, namespace: str, name: str) -> dict[str, Any] | None:
        return stored.get((kind, name))

    pdb = budget(maxUnavailable="34%")
    assert budget_status(pdb, pods, lookup).as_status() == loaded(*objects).pdb_status(pdb).as_status()


# -- the Eviction API --------------------------------------------------------------------------------------


async def test_evictions_go_one_at_a_time_under_max_unavailable_one() -> None:
    kube = loaded(*web_deployment(4, 4), budget(maxUnavailable=1))
    await kube.evict("web-7d4b9c-00000", NS)
    with pytest.raises(TooManyRequestsError, match="needs 3 healthy pods and has 3 currently"):
        await kube.evict("web-7d4b9c-00001", NS)  # the evicted pod is not back: the base stays 4


async def test_a_budget_over_pods_without_a_controller_says_why_it_allows_nothing() -> None:
    kube = loaded(pod("a"), pod("b"), budget(maxUnavailable=1))
    with pytest.raises(TooManyRequestsError, match="the 2 pod\\(s\\) it selects have no controller"):
        await kube.evict("a", NS)
    jobs = loaded(pod("a", owner=("batch/v1", "Job", "j")), budget(maxUnavailable="50%"))
    with pytest.raises(TooManyRequestsError, match=r"jobs\.batch does not implement the scale subresource"):
        await jobs.evict("a", NS)


async def test_unhealthy_pod_eviction_policy() -> None:
    objects = [*web_deployment(3, 2), pod("web-7d4b9c-sick", owner=("apps/v1", "ReplicaSet", "web-7d4b9c"),
                                          ready=False)]
    # IfHealthyBudget (the default): 2 healthy >= 2 desired (maxUnavailable 1 of 3), so the unready pod goes
    # although no disruption is allowed for healthy ones (2 - 2 = 0).
    kube = loaded(*objects, budget(maxUnavailable=1))
    with pytest.raises(TooManyRequestsError):
        await kube.evict("web-7d4b9c-00000", NS)
    await kube.evict("web-7d4b9c-sick", NS)
    # Below the desired healthy count an unready pod is kept...
    short = loaded(*objects, budget(maxUnavailable=0))
    with pytest.raises(TooManyRequestsError):
        await short.evict("web-7d4b9c-sick", NS)
    # ... unless the budget says AlwaysAllow.
    always = loaded(*objects, budget(maxUnavailable=0, unhealthyPodEvictionPolicy="AlwaysAllow"))
    await always.evict("web-7d4b9c-sick", NS)
    # A budget desiring no healthy pod does not let unready pods skip the count: it falls to disruptions allowed.
    zero = loaded(pod("a", ready=False), pod("b"), budget(minAvailable=0))
    await zero.evict("a", NS)  # 1 healthy - 0 desired = 1 allowed


async def test_pending_terminal_and_terminating_pods_skip_budgets_and_two_budgets_refuse() -> None:
    kube = loaded(*web_deployment(2, 2), pod("pending", phase="Pending"), pod("done", phase="Succeeded"),
                  budget(maxUnavailable=0))
    await kube.evict("pending", NS)
    await kube.evict("done", NS)
    two = loaded(*web_deployment(2, 2), budget("one", minAvailable=0), budget("two", minAvailable=0))
    with pytest.raises(ApiError) as error:
        await two.evict("web-7d4b9c-00000", NS)
    assert error.value.status == 500
