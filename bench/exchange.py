"""The problem both schedulers solve, as one JSON document (read by Adze here and by bench/karpenter/ in Go).

A problem (``format: adze-karpenter-bench/v1``) holds:

- ``nodePools``: karpenter.sh/v1 NodePool manifests, as Adze reads them;
- ``instanceTypes``: every type of the catalogue with ``name``, ``capacity`` and ``overhead`` (Kubernetes
  resource lists, exact quantities), ``labels`` (the type's single-valued labels) and ``offerings``
  (``zone``, ``zoneID``, ``capacityType``, ``price`` in $/h, ``available``); every NodePool may use every type;
- ``pods``: v1 Pod manifests (pending: no ``nodeName``);
- ``preferencePolicy``: ``Respect`` or ``Ignore`` (Karpenter's ``--preference-policy``).

Both sides report what they read as an input summary (type, offering and pod counts, the sum of offering
prices, allocatable and pod requests in milli-units) so ``bench/compare.py`` can check they saw the same problem,
and each NodeClaim they decide on as its instance type options and the zones and capacity types its
requirements allow; ``claim_price`` prices both from the one catalogue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconciler.cloud.types import InstanceType, Offering
from reconciler.model.pod import Pod
from reconciler.model.resources import Resources

FORMAT = "adze-karpenter-bench/v1"


def instance_type_document(itype: InstanceType) -> dict[str, Any]:
    return {
        "name": itype.name,
        "capacity": itype.capacity.to_manifest(),
        "overhead": itype.overhead.to_manifest(),
        "labels": dict(itype.labels),
        "offerings": [{"zone": o.zone, "zoneID": o.zone_id, "capacityType": o.capacity_type, "price": o.price,
                       "available": o.available} for o in itype.offerings],
    }


def instance_type_from_document(document: Mapping[str, Any]) -> InstanceType:
    return InstanceType(
        name=document["name"],
        capacity=Resources.from_manifest(document["capacity"]),
        overhead=Resources.from_manifest(document["overhead"]),
        offerings=tuple(Offering(o["zone"], o["capacityType"], float(o["price"]), bool(o["available"]),
                                 zone_id=o.get("zoneID", "")) for o in document["offerings"]),
        labels=dict(document["labels"]),
    )


def problem_document(name: str, nodepools: Sequence[Mapping[str, Any]], types: Sequence[InstanceType],
                     pods: Sequence[Mapping[str, Any]], preference_policy: str = "Respect") -> dict[str, Any]:
    if preference_policy not in ("Respect", "Ignore"):
        raise ValueError(f"preferencePolicy must be Respect or Ignore, not {preference_policy!r}")
    return {"format": FORMAT, "name": name, "preferencePolicy": preference_policy, "nodePools": list(nodepools),
            "instanceTypes": [instance_type_document(t) for t in types], "pods": list(pods)}


def read_problem(document: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[InstanceType], list[dict], str]:
    """(NodePool manifests, instance types, pod manifests, preference policy) of a problem document."""
    if document.get("format") != FORMAT:
        raise ValueError(f"problem format {document.get('format')!r}, want {FORMAT!r}")
    types = [instance_type_from_document(t) for t in document["instanceTypes"]]
    return list(document["nodePools"]), types, list(document["pods"]), document.get("preferencePolicy", "Respect")


def input_summary(types: Sequence[InstanceType], pods: Iterable[Pod], nodepools: Iterable[str]) -> dict[str, Any]:
    """What a side read, in the Go driver's terms (bench/karpenter/problem.go ``summarize``)."""
    allocatable: dict[str, int] = {}
    for itype in types:
        for name, amount in itype.allocatable.items():
            allocatable[name] = allocatable.get(name, 0) + amount
    requests: dict[str, int] = {}
    count = 0
    for pod in pods:
        count += 1
        for name, amount in pod.scheduling_requests.items():
            requests[name] = requests.get(name, 0) + amount
    offerings = [o for t in types for o in t.offerings]
    return {
        "instanceTypes": len(types),
        "offerings": len(offerings),
        "availableOfferings": sum(1 for o in offerings if o.available),
        "offeringPriceSum": sum(o.price for o in offerings),
        "allocatableMilli": {k: v for k, v in allocatable.items() if v},
        "pods": count,
        "podRequestsMilli": {k: v for k, v in requests.items() if v},
        "nodePools": sorted(nodepools),
    }


def summary_differences(adze: Mapping[str, Any], karpenter: Mapping[str, Any]) -> list[str]:
    """Where the two sides' input summaries disagree (prices compared to a millionth of a cent)."""
    differences = []
    for key in sorted(set(adze) | set(karpenter)):
        mine, theirs = adze.get(key), karpenter.get(key)
        if key == "offeringPriceSum":
            if abs(float(mine or 0) - float(theirs or 0)) > 1e-8 * max(1.0, abs(float(mine or 0))):
                differences.append(f"{key}: Adze {mine} vs Karpenter {theirs}")
        elif key == "nodePools":
            if sorted(mine or []) != sorted(theirs or []):
                differences.append(f"{key}: Adze {mine} vs Karpenter {theirs}")
        elif isinstance(mine, Mapping) or isinstance(theirs, Mapping):
            mine_map = {k: v for k, v in (mine or {}).items() if v}
            theirs_map = {k: v for k, v in (theirs or {}).items() if v}
            if mine_map != theirs_map:
                differences.append(f"{key}: Adze {mine_map} vs Karpenter {theirs_map}")
        elif mine != theirs:
            differences.append(f"{key}: Adze {mine} vs Karpenter {theirs}")
    return differences


def claim_price(types_by_name: Mapping[str, InstanceType], options: Iterable[str], zones: Sequence[str] | None,
                capacity_types: Sequence[str] | None) -> float:
    """The cheapest available offering among a claim's options in the zones and capacity types it allows."""
    best = float("inf")
    for name in options:
        offering = types_by_name[name].cheapest_offering(zones, capacity_types)
        if offering is not None and offering.price < best:
            best = offering.price
    return best
