"""The reconciler's Kubernetes permissions: exactly what it reads, writes and deletes.

Reads cover everything the scheduler simulation looks at (pods and their owners,
nodes, disruption budgets, volumes and storage, priority and runtime classes).
Writes are limited to nodes (labels, taints, finalizers, deletion), evictions,
events and its own API objects. Namespaced: the leader-election Lease in the
reconciler's namespace, and reading the ``kube-dns`` Service in ``kube-system``
(its clusterIP is the DNS server nodes are bootstrapped with, as Karpenter reads it).
"""

from __future__ import annotations

from typing import Any

Rule = dict[str, Any]

READ = ("get", "list", "watch")
CRUD = ("get", "list", "watch", "create", "update", "patch", "delete")
STATUS_WRITE = ("get", "update", "patch")


def _rule(group: str, resources: list[str], verbs: tuple[str, ...], names: list[str] | None = None) -> Rule:
    rule: Rule = {"apiGroups": [group], "resources": resources, "verbs": list(verbs)}
    if names:
        rule["resourceNames"] = names
    return rule


def cluster_role_rules() -> list[Rule]:
    return [
        # What scheduling simulation reads (namespaces: pod affinity namespace selectors).
        _rule("", ["pods", "nodes", "persistentvolumes", "persistentvolumeclaims", "namespaces"], READ),
        _rule("apps", ["daemonsets", "deployments", "replicasets", "statefulsets"], READ),
        _rule("batch", ["jobs"], READ),
        _rule("policy", ["poddisruptionbudgets"], READ),
        _rule("storage.k8s.io", ["storageclasses", "csinodes", "volumeattachments"], READ),
        _rule("scheduling.k8s.io", ["priorityclasses"], READ),
        _rule("node.k8s.io", ["runtimeclasses"], READ),
        # Node lifecycle: labels/taints/finalizers by patch, removal after drain.
        _rule("", ["nodes"], ("create", "patch", "delete")),
        # Drain goes through the Eviction API so PodDisruptionBudgets are honoured.
        _rule("", ["pods/eviction"], ("create",)),
        # Past a NodeClaim's terminationGracePeriod deadline pods are deleted (PDBs no longer apply),
        # and pods left bound to a Node that is gone are removed with it.
        _rule("", ["pods"], ("delete",)),
        _rule("", ["events"], ("create", "patch")),
        _rule("karpenter.sh", ["nodepools", "nodeclaims"], CRUD),
        _rule("karpenter.sh", ["nodepools/status", "nodeclaims/status"], STATUS_WRITE),
        # NodeOverlays (gate NodeOverlay): watched by the scheduler, their validation written to status.
        _rule("karpenter.sh", ["nodeoverlays"], READ),
        _rule("karpenter.sh", ["nodeoverlays/status"], STATUS_WRITE),
        _rule("karpenter.k8s.aws", ["ec2nodeclasses"], CRUD),
        _rule("karpenter.k8s.aws", ["ec2nodeclasses/status"], STATUS_WRITE),
    ]


def leader_election_rules(lease_name: str) -> list[Rule]:
    """Create a Lease (names cannot restrict ``create``), then touch only the reconciler's own."""
    return [
        _rule("coordination.k8s.io", ["leases"], ("create",)),
        _rule("coordination.k8s.io", ["leases"], ("get", "watch", "update", "patch"), [lease_name]),
    ]


KUBE_DNS_NAMESPACE = "kube-system"


def dns_discovery_rules() -> list[Rule]:
    """Read the cluster DNS Service, and only it (a Role in ``KUBE_DNS_NAMESPACE``)."""
    return [_rule("", ["services"], ("get",), ["kube-dns"])]


def writes_outside_own_api(rules: list[Rule]) -> list[tuple[str, str, str]]:
    """(group, resource, verb) of every write on objects Adze does not own; used to audit least privilege."""
    own = {"karpenter.sh", "karpenter.k8s.aws", "coordination.k8s.io"}
    found = []
    for rule in rules:
        for group in rule["apiGroups"]:
            if group in own:
                continue
            for resource in rule["resources"]:
                found += [(group, resource, verb) for verb in rule["verbs"] if verb not in READ]
    return sorted(found)
