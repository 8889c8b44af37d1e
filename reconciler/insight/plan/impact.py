"""What a plan does to workloads: pods evicted per workload, and the PodDisruptionBudgets that pace it.

A workload is the pod's controller as a person names it: a Deployment (through its ReplicaSet's
``pod-template-hash``), a StatefulSet, Job or DaemonSet, else the bare pod. A PDB "slows" a workload
when it selects the workload's pods: evictions then go as fast as its ``disruptionsAllowed`` lets
them, and a PDB the plan saw refuse an eviction (a ``TerminationBlocked`` event or a ``PDB`` blocker)
is marked as having held the drain up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconciler.model.selectors import LabelSelector, SelectorError
from reconciler.sim.workloads import OWNER_ANNOTATION

_REPLICA_SUFFIX = re.compile(r"-([0-9]+|[a-z0-9]{5})$")


def workload_of(pod: Mapping[str, Any] | None, key: str) -> str:
    """``Kind/name`` of the workload owning a pod (``key`` is ``namespace/name``, used when the pod is gone)."""
    metadata = (pod or {}).get("metadata") or {}
    owner = (metadata.get("annotations") or {}).get(OWNER_ANNOTATION)
    if owner:  # the simulator's workload controllers: Kind/namespace/name
        kind, _, rest = str(owner).partition("/")
        return f"{kind}/{rest.partition('/')[2]}"
    for ref in metadata.get("ownerReferences") or []:
        if not ref.get("controller", True):
            continue
        kind, name = str(ref.get("kind", "")), str(ref.get("name", ""))
        template_hash = (metadata.get("labels") or {}).get("pod-template-hash")
        if kind == "ReplicaSet" and template_hash and name.endswith(f"-{template_hash}"):
            return f"Deployment/{name[: -len(template_hash) - 1]}"
        return f"{kind}/{name}"
    name = key.partition("/")[2]
    return f"Pod/{_REPLICA_SUFFIX.sub('', name) if pod is None else name}"


def evictions_by_workload(
    records: Sequence[Mapping[str, Any]],
    pods: Mapping[str, Mapping[str, Any]],
    pdbs: Iterable[Mapping[str, Any]],
    blocker_messages: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """One entry per workload with evicted pods, most evicted first: its namespace, count and PDBs.

    ``pods``: pod manifests by ``namespace/name`` (the snapshot's and the simulation's), ``pdbs``: the
    PDB manifests, ``blocker_messages``: messages of the plan's blockers (a PDB named there held it up).
    """
    counts: dict[tuple[str, str], int] = {}
    labels: dict[tuple[str, str], Mapping[str, str]] = {}
    refusals = list(blocker_messages)
    for record in records:
        for event in record["events"]:
            if event.get("reason") == "TerminationBlocked":
                refusals.append(str(event.get("message", "")))
            if event.get("reason") != "Evicted":
                continue
            key = str(event.get("object", "")).partition("/")[2]
            pod = pods.get(key)
            entry = (key.partition("/")[0], workload_of(pod, key))
            counts[entry] = counts.get(entry, 0) + 1
            if pod is not None and entry not in labels:
                labels[entry] = (pod.get("metadata") or {}).get("labels") or {}
    budgets = [_pdb(manifest) for manifest in pdbs]
    result = []
    for (namespace, workload), evicted in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        pod_labels = labels.get((namespace, workload), {})
        matching = [b for b in budgets if b and b["namespace"] == namespace and b["selector"].matches(pod_labels)]
        result.append(
            {
                "namespace": namespace,
                "workload": workload,
                "evicted": evicted,
                "pdbs": [
                    {
                        "name": b["name"],
                        "rule": b["rule"],
                        "disruptionsAllowed": b["allowed"],
                        "heldUp": any(f"{namespace}/{b['name']}" in message for message in refusals),
                    }
                    for b in matching
                ],
            }
        )
    return result


def _pdb(manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    metadata = manifest.get("metadata") or {}
    spec = manifest.get("spec") or {}
    try:
        selector = LabelSelector.from_manifest(spec.get("selector"), path="spec.selector")
    except SelectorError:
        return None
    if spec.get("maxUnavailable") is not None:
        rule = f"maxUnavailable {spec['maxUnavailable']}"
    elif spec.get("minAvailable") is not None:
        rule = f"minAvailable {spec['minAvailable']}"
    else:
        rule = "minAvailable 1"
    return {
        "namespace": str(metadata.get("namespace") or "default"),
        "name": str(metadata.get("name", "")),
        "selector": selector,
        "rule": rule,
        "allowed": (manifest.get("status") or {}).get("disruptionsAllowed"),
    }


def describe_workload(entry: Mapping[str, Any]) -> str:
    """``default/Deployment/web: 6 pod(s) evicted; PDB web-pdb (maxUnavailable 1, allows 1) held it up``."""
    text = f"{entry['namespace']}/{entry['workload']}: {entry['evicted']} pod(s) evicted"
    pdbs = []
    for pdb in entry["pdbs"]:
        allowed = "" if pdb["disruptionsAllowed"] is None else f", allows {pdb['disruptionsAllowed']} at a time"
        pdbs.append(f"PDB {pdb['name']} ({pdb['rule']}{allowed})" + (" held it up" if pdb["heldUp"] else ""))
    if pdbs:
        text += "; paced by " + ", ".join(pdbs)
    return text
