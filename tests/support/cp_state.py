"""What the tests on the real control plane read back: NodeClaims, pods, moto's instances and the audit log.

Predicates take the ``Objects`` a ``cluster_watch.wait_for``/``Recorder`` hands them ("namespace/name" ->
object); the audit helpers read ``ControlPlane.audit_events`` (every write, and every request of the
reconcilers' ServiceAccounts).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from support.cluster_watch import Objects
from support.control_plane import ControlPlane
from support.cp_manifests import is_ready

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.model import labels as wk

NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
NODES = "/api/v1/nodes"
DISRUPTED_TAINT = "karpenter.sh/disrupted"
LIVE_STATES = ("pending", "running")


def name_of(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def deleting(obj: dict[str, Any]) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def condition_true(obj: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def initialized(claim: dict[str, Any]) -> bool:
    """A NodeClaim whose node registered and initialized, not being deleted."""
    return condition_true(claim, "Initialized") and not deleting(claim)


def pool_of(obj: dict[str, Any]) -> str | None:
    return (obj["metadata"].get("labels") or {}).get(wk.NODEPOOL)


def instance_of(claim: dict[str, Any]) -> str | None:
    provider_id = (claim.get("status") or {}).get("providerID") or ""
    return provider_id.rsplit("/", 1)[1] if provider_id else None


def tainted_disrupted(node: dict[str, Any]) -> bool:
    return any(t.get("key") == DISRUPTED_TAINT for t in (node.get("spec") or {}).get("taints") or [])


def app_pods(pods: Objects, app: str) -> list[dict[str, Any]]:
    return [p for p in pods.values() if (p["metadata"].get("labels") or {}).get("app") == app]


def running(pods: Objects, app: str, count: int, *, on: Iterable[str] | None = None) -> bool:
    """Exactly ``count`` pods of ``app``, each bound and Ready (and, with ``on``, on one of those nodes)."""
    mine = [p for p in app_pods(pods, app) if not deleting(p)]
    allowed = None if on is None else set(on)
    return len(mine) == count and all(
        p["spec"].get("nodeName") and is_ready(p) and (allowed is None or p["spec"]["nodeName"] in allowed)
        for p in mine
    )


def healthy(pods: Objects, app: str) -> int:
    return sum(1 for p in app_pods(pods, app) if not deleting(p) and is_ready(p))


def describe_pods(pods: Objects) -> str:
    counts = Counter(
        ((p["metadata"].get("labels") or {}).get("app"), "bound" if p["spec"].get("nodeName") else "pending",
         "ready" if is_ready(p) else "not-ready", "deleting" if deleting(p) else "")
        for p in pods.values()
    )
    return ", ".join(f"{'/'.join(filter(None, key))}: {n}" for key, n in sorted(counts.items())) or "(no pods)"


def describe_claims(claims: Objects) -> str:
    return ", ".join(
        f"{name_of(c)}[{pool_of(c)}]{' init' if condition_true(c, 'Initialized') else ''}"
        f"{' deleting' if deleting(c) else ''}"
        for c in claims.values()
    ) or "(no nodeclaims)"


def live_instances(aws: OfflineAWS) -> dict[str, dict[str, Any]]:
    """The cluster's pending or running instances in moto, by id."""
    pages = aws.client("ec2").get_paginator("describe_instances").paginate(Filters=[
        {"Name": f"tag:kubernetes.io/cluster/{aws.cluster}", "Values": ["owned"]},
        {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
    ])
    return {i["InstanceId"]: i for page in pages for r in page["Reservations"] for i in r["Instances"]}


def instance_state(aws: OfflineAWS, instance_id: str) -> str:
    answer = aws.client("ec2").describe_instances(InstanceIds=[instance_id])
    return str(answer["Reservations"][0]["Instances"][0]["State"]["Name"])


# --- the audit log ---------------------------------------------------------------------------------------


def object_ref(event: dict[str, Any]) -> dict[str, Any]:
    return event.get("objectRef") or {}


def username(event: dict[str, Any]) -> str:
    return str((event.get("user") or {}).get("username", ""))


def binders(plane: ControlPlane, namespace: str, pod_names: set[str]) -> set[str]:
    """Who created each pod's binding (``pods/binding``), from the audit log; every pod must have one."""
    events = plane.audit_events(
        lambda e: object_ref(e).get("subresource") == "binding" and object_ref(e).get("namespace") == namespace
        and object_ref(e).get("name") in pod_names and e["responseStatus"]["code"] == 201
    )
    by_pod = {e["objectRef"]["name"]: username(e) for e in events}
    assert set(by_pod) == pod_names, f"pods without a recorded binding: {sorted(pod_names - set(by_pod))[:5]}"
    return set(by_pod.values())


def plain_pod_deletes(plane: ControlPlane, user: str) -> list[str]:
    """Pods ``user`` deleted outright (not through ``pods/eviction``)."""
    return [object_ref(e).get("name", "") for e in plane.audit_events(
        lambda e: username(e) == user and e["verb"] == "delete" and object_ref(e).get("resource") == "pods"
        and not object_ref(e).get("subresource"))]


def accepted_evictions(plane: ControlPlane, user: str) -> list[str]:
    return [object_ref(e).get("name", "") for e in plane.audit_events(
        lambda e: username(e) == user and object_ref(e).get("subresource") == "eviction"
        and e["responseStatus"]["code"] == 201)]
