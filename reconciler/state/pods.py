"""The cluster state's view of pods: the pods of nodes marked for deletion. Pure.

Both the provisioner and disruption read them (Karpenter's ``StateNodes.Deleting().CurrentlyReschedulablePods``
is a cluster-state method too), so they live beside ``state`` rather than in either decision package.
"""

from __future__ import annotations

from datetime import datetime

from reconciler.model.pdb import PdbLimits
from reconciler.model.pod import Pod
from reconciler.state.cluster import ClusterState


def deleting_nodes_pods(state: ClusterState, pdbs: PdbLimits, now: datetime) -> tuple[set[str], list[Pod]]:
    """Nodes marked for deletion, and their pods that need a new home (upstream's
    ``CurrentlyReschedulablePods``): active pods and terminating StatefulSet pods (their successor needs
    the room); not DaemonSet or static pods, nor pods an active do-not-disrupt or a PDB that never allows
    an eviction keeps where they are. Shared by the provisioner and the disruption simulation."""
    names: set[str] = set()
    pods: list[Pod] = []
    for node in state.state_nodes():
        if node.marked_for_deletion:
            names.add(node.name)
            pods.extend(p for p in node.pods.values() if pdbs.is_currently_reschedulable(p, now))
    return names, pods
