"""What a plan does to workloads: pods evicted per workload, and the PodDisruptionBudgets that pace it.

A workload is the pod's controller as a person names it: a Deployment (through the ReplicaSet its pods name,
which the Deployment controls), a StatefulSet, Job or DaemonSet, else the bare pod. Each eviction event of the
simulation names the evicted pod's controller, so a pod made and evicted during the plan is attributed too.
Per workload the plan counts how many of the pods running at the start were evicted (at most its replicas)
and every eviction (a replacement moved again counts again). A PDB "paces" a workload when it selects its
pods: evictions then go as fast as its disruptions allowed (as counted at the start) let them, and a PDB the
plan saw refuse an eviction (a ``TerminationBlocked`` event or a ``PDB`` blocker) is marked as having held
the drain up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.model.selectors import LabelSelector, SelectorError

_REPLICA_SUFFIX = re.compile(r"-([0-9]+|[a-z0-9]{5})$")


def replicaset_owners(manifests: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(namespace, ReplicaSet) -> ``Deployment/name`` for each ReplicaSet a Deployment controls."""
    owners = {}
    for manifest in manifests:
        if manifest.get("kind") != "ReplicaSet":
            continue
        metadata = manifest.get("metadata") or {}
        key = (str(metadata.get("namespace") or "default"), str(metadata.get("name")))
        for ref in metadata.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "Deployment":
                owners[key] = f"Deployment/{ref['name']}"
    return owners


def workload_of(
    pod: Mapping[str, Any] | None, key: str, owners: Mapping[tuple[str, str], str] = {}, owner: str | None = None
) -> str:
    """``Kind/name`` of the workload owning a pod (``key`` is ``namespace/name``, used when the pod is gone;
    ``owner``: its controller as ``Kind/name`` when known without the pod, as an eviction event names it)."""
    namespace, _, name = key.partition("/")
    metadata = (pod or {}).get("metadata") or {}
    if owner is None:
        ref = next((r for r in metadata.get("ownerReferences") or [] if r.get("controller", True)), None)
        owner = f"{ref.get('kind', '')}/{ref.get('name', '')}" if ref is not None else None
    if owner is not None:
        kind, _, owner_name = owner.partition("/")
        if kind == "ReplicaSet":
            deployment = owners.get((namespace, owner_name))
            if deployment is not None:
                return deployment
            template_hash = (metadata.get("labels") or {}).get("pod-template-hash")
            if template_hash and owner_name.endswith(f"-{template_hash}"):  # a dump without its ReplicaSets
                return f"Deployment/{owner_name[: -len(template_hash) - 1]}"
        return owner
    return f"Pod/{_REPLICA_SUFFIX.sub('', name) if pod is None else name}"


@dataclass(slots=True)
class _Tally:
    evicted: set[str] = field(default_factory=set)  # pods running at the start that were evicted
    evictions: int = 0
    labels: Mapping[str, str] | None = None  # of one of its pods, to match budgets against


def evictions_by_workload(
    records: Sequence[Mapping[str, Any]],
    pods: Mapping[str, Mapping[str, Any]],
    pdbs: Iterable[Mapping[str, Any]],
    blocker_messages: Iterable[str] = (),
    *,
    started: Iterable[str] = (),
    owners: Mapping[tuple[str, str], str] = {},
    replicas: Mapping[tuple[str, str], int] = {},
    allowed: Mapping[str, int] = {},
) -> list[dict[str, Any]]:
    """One entry per workload with evictions, most evicted first: its namespace, pods evicted of those running
    at the start, evictions, replicas and PDBs.

    ``pods``: pod manifests by ``namespace/name`` (the snapshot's and the simulation's, for their labels);
    ``pdbs``: the PDB manifests; ``blocker_messages``: messages of the plan's blockers (a PDB named there held
    it up); ``started``: the pods running at the start; ``owners``: ``replicaset_owners``; ``replicas``:
    (namespace, ``Kind/name``) -> the workload's replicas; ``allowed``: ``namespace/name`` of a PDB -> the
    disruptions it allowed at the start.
    """
    at_start = set(started)
    tallies: dict[tuple[str, str], _Tally] = {}
    refusals = list(blocker_messages)
    for record in records:
        for event in record["events"]:
            if event.get("reason") == "TerminationBlocked":
                refusals.append(str(event.get("message", "")))
            if event.get("reason") != "Evicted":
                continue
            key = str(event.get("object", "")).partition("/")[2]
            pod = pods.get(key)
            namespace = key.partition("/")[0]
            tally = tallies.setdefault((namespace, workload_of(pod, key, owners, event.get("owner"))), _Tally())
            tally.evictions += 1
            if key in at_start:
                tally.evicted.add(key)
            if pod is not None and tally.labels is None:
                tally.labels = (pod.get("metadata") or {}).get("labels") or {}
    budgets = [b for b in (_pdb(manifest, allowed) for manifest in pdbs) if b is not None]
    result = []
    for (namespace, workload), tally in sorted(tallies.items(), key=lambda i: (-len(i[1].evicted), -i[1].evictions,
                                                                                i[0])):
        labels = tally.labels or {}
        matching = [b for b in budgets if b["namespace"] == namespace and b["selector"].matches(labels)]
        result.append(
            {
                "namespace": namespace,
                "workload": workload,
                "evicted": len(tally.evicted),
                "evictions": tally.evictions,
                "replicas": replicas.get((namespace, workload)),
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


def _pdb(manifest: Mapping[str, Any], allowed: Mapping[str, int]) -> dict[str, Any] | None:
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
        rule = "neither minAvailable nor maxUnavailable"
    namespace, name = str(metadata.get("namespace") or "default"), str(metadata.get("name", ""))
    return {
        "namespace": namespace,
        "name": name,
        "selector": selector,
        "rule": rule,
        "allowed": allowed.get(f"{namespace}/{name}", (manifest.get("status") or {}).get("disruptionsAllowed")),
    }


def describe_workload(entry: Mapping[str, Any]) -> str:
    """``default/Deployment/web: 6 of 6 pods evicted (9 evictions: replacements moved again); paced by PDB web
    (maxUnavailable 1, allows 1 at a time), which held it up``."""
    replicas = entry.get("replicas")
    evicted, evictions = entry["evicted"], entry.get("evictions", entry["evicted"])
    text = f"{entry['namespace']}/{entry['workload']}: "
    text += f"{evicted} of {replicas} pod(s) evicted" if replicas is not None else f"{evicted} pod(s) evicted"
    if evictions != evicted:
        text += f" ({evictions} evictions: pods made during the change were moved again)"
    pdbs = []
    for pdb in entry["pdbs"]:
        allowed = "" if pdb["disruptionsAllowed"] is None else f", allows {pdb['disruptionsAllowed']} at a time"
        pdbs.append(f"PDB {pdb['name']} ({pdb['rule']}{allowed})" + (", which held it up" if pdb["heldUp"] else ""))
    if pdbs:
        text += "; paced by " + ", ".join(pdbs)
    return text
