"""NodeOverlays in the live reconciler (gate NodeOverlay): watched, validated into their status, used by the
provisioner's scheduling and by the launch (the overlaid price decides the instance), RBAC-granted."""

from __future__ import annotations

from typing import Any

from ctrl_harness import Rig, running, wait_for
from ctrl_objects import deployment, fast_settings, nodeclass, nodepool

from components.rbac import cluster_role_rules
from reconciler.controllers.operator.manager import Reconciler
from reconciler.kube.api import NODECLAIM, NODEOVERLAY
from reconciler.kube.semantics import plural
from reconciler.model import labels as wk
from reconciler.settings import DEFAULT_FEATURE_GATES


def gated() -> Any:
    return fast_settings(feature_gates={**DEFAULT_FEATURE_GATES, "NodeOverlay": True})


def overlay(name: str, price: str, weight: int | None = None, types: tuple[str, ...] = ("c5.xlarge",)) -> dict:
    spec: dict[str, Any] = {"requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": list(types)}],
                            "price": price}
    if weight is not None:
        spec["weight"] = weight
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name}, "spec": spec}


def conditions(rig: Rig, name: str) -> dict[str, tuple[str, str]]:
    found = rig.kube.peek(NODEOVERLAY, name) or {}
    return {c["type"]: (c["status"], c["reason"]) for c in (found.get("status") or {}).get("conditions") or []}


async def test_an_overlay_price_decides_what_the_live_provisioner_launches() -> None:
    """c5.large lists cheapest for one 1-CPU pod; the overlay prices c5.xlarge below it, so that launches."""
    rig = Rig(settings=gated())
    await rig.apply(nodeclass(), nodepool(), overlay("cheap-xlarge", "0.01"), deployment(replicas=1))
    async with running(rig):
        assert await wait_for(lambda: rig.converged(instances=1))
        assert await wait_for(lambda: _async(conditions(rig, "cheap-xlarge").get("Ready") == ("True", "Ready")))
    [claim] = rig.kube.objects(NODECLAIM)
    assert claim["metadata"]["labels"][wk.INSTANCE_TYPE] == "c5.xlarge"
    assert claim["metadata"]["annotations"][wk.PRICE_OVERLAY_APPLIED] == "true"


async def test_without_the_gate_overlays_are_not_even_watched() -> None:
    rig = Rig()
    await rig.apply(nodeclass(), nodepool(), overlay("cheap-xlarge", "0.01"), deployment(replicas=1))
    async with running(rig):
        assert await wait_for(lambda: rig.converged(instances=1))
    [claim] = rig.kube.objects(NODECLAIM)
    assert claim["metadata"]["labels"][wk.INSTANCE_TYPE] == "c5.large"
    assert conditions(rig, "cheap-xlarge") == {}


async def test_conflicting_overlays_get_a_false_condition() -> None:
    rig = Rig(settings=gated())
    await rig.apply(nodeclass(), nodepool(), overlay("alpha", "0.2", weight=5), overlay("beta", "0.3", weight=5))
    reconciler = Reconciler(rig.context(), disruption=False)
    for kind in reconciler.watched:
        for item in rig.kube.objects(kind):
            reconciler.store.upsert(item)
    book = await reconciler.nodeoverlay.reconcile_once()
    assert conditions(rig, "beta")["ValidationSucceeded"] == ("True", "ValidationSucceeded")
    assert conditions(rig, "alpha")["ValidationSucceeded"] == ("False", "Conflict")
    assert conditions(rig, "alpha")["Ready"][0] == "False"
    assert "alpha" in book.conflicts


def test_every_kind_the_reconciler_watches_is_readable_under_its_rbac() -> None:
    rules = cluster_role_rules()
    granted = {(group, resource, verb) for rule in rules for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    rig = Rig(settings=gated())
    reconciler = Reconciler(rig.context(), disruption=False)
    assert NODEOVERLAY in reconciler.watched
    for kind in reconciler.watched:
        for verb in ("list", "watch"):
            assert (kind.group, plural(kind), verb) in granted, (kind, verb)
    assert ("karpenter.sh", "nodeoverlays/status", "patch") in granted


async def _async(value: bool) -> bool:
    return value
