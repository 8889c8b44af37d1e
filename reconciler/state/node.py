"""``StateNode``: one node as the engine sees it, merging the Node, its NodeClaim and the pods bound to it.

A NodeClaim without a Node yet is an in-flight node; a Node without a NodeClaim
is either unmanaged or (in snapshots) a managed node whose claim was not given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from reconciler.model import labels as wk
from reconciler.model.node import Node, NodeClaim
from reconciler.model.pod import HostPort, Pod
from reconciler.model.requirements import Requirement, Requirements
from reconciler.model.resources import EMPTY, Resources
from reconciler.model.taints import Taint, is_ephemeral


@dataclass(slots=True, frozen=True)
class StateNode:
    name: str
    node: Node | None
    nodeclaim: NodeClaim | None
    pods: dict[str, Pod] = field(default_factory=dict)
    marked_for_deletion_flag: bool = False
    nominated_until: datetime | None = None
    # Derived once at build time (see ``build_state_node``).
    labels: Mapping[str, str] = field(default_factory=dict)
    capacity: Resources = EMPTY
    allocatable: Resources = EMPTY
    pod_requests: Resources = EMPTY
    daemonset_requests: Resources = EMPTY
    host_ports: tuple[tuple[str, HostPort], ...] = ()
    # CSI driver -> PVC keys in use, and driver -> attach limit (from CSINode), for volume limits.
    volume_usage: Mapping[str, frozenset[str]] = field(default_factory=dict)
    volume_limits: Mapping[str, int] = field(default_factory=dict)
    # Memos: a StateNode is rebuilt whenever its Node, NodeClaim or pods change, and scheduling runs
    # (one per disruption what-if) read these for every node.
    _requirements: Requirements | None = field(default=None, repr=False, compare=False)
    _room: tuple[tuple[Pod, ...], dict[str, int]] | None = field(default=None, repr=False, compare=False)
    _memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # Read for every node of every pass and scheduling run: derived once from the fields above, which never
    # change (frozen), in ``__post_init__``.
    nodepool: str = field(init=False, repr=False, compare=False)
    instance_type: str = field(init=False, repr=False, compare=False)
    zone: str = field(init=False, repr=False, compare=False)
    capacity_type: str = field(init=False, repr=False, compare=False)
    hostname: str = field(init=False, repr=False, compare=False)
    managed: bool = field(init=False, repr=False, compare=False)
    initialized: bool = field(init=False, repr=False, compare=False)
    deleting: bool = field(init=False, repr=False, compare=False)
    marked_for_deletion: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        derive = partial(object.__setattr__, self)
        labels = self.labels
        derive("nodepool", labels.get(wk.NODEPOOL, ""))
        derive("instance_type", labels.get(wk.INSTANCE_TYPE, ""))
        derive("zone", labels.get(wk.ZONE, ""))
        derive("capacity_type", labels.get(wk.CAPACITY_TYPE, ""))
        derive("hostname", labels.get(wk.HOSTNAME, self.name))
        derive("managed", self.nodeclaim is not None or bool(labels.get(wk.NODEPOOL)))
        derive("initialized", _initialized(self.node, self.nodeclaim))
        deleting = bool(
            (self.node and self.node.deletion_timestamp) or (self.nodeclaim and self.nodeclaim.deletion_timestamp)
        )
        derive("deleting", deleting)
        derive("marked_for_deletion", self.marked_for_deletion_flag or deleting)

    # -- identity ------------------------------------------------------------------------------
    @property
    def nodeclaim_name(self) -> str:
        return self.nodeclaim.name if self.nodeclaim else ""

    @property
    def node_name(self) -> str:
        return self.node.name if self.node else ""

    @property
    def provider_id(self) -> str:
        if self.node and self.node.provider_id:
            return self.node.provider_id
        return self.nodeclaim.provider_id if self.nodeclaim else ""

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def registered(self) -> bool:
        if self.node is None:
            return False
        if self.nodeclaim is not None:
            return self.nodeclaim.registered or self.node.labels.get(wk.REGISTERED) == "true"
        return True

    def nominated(self, now: datetime) -> bool:
        return self.nominated_until is not None and now < self.nominated_until

    def memo(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once for this node as it is now: views derived only from the node and its pods."""
        if name not in self._memo:
            self._memo[name] = compute()
        return self._memo[name]

    def memo_get(self, name: str) -> Any:
        """A memo its owner validates itself (e.g. one that also depends on the clock), or None."""
        return self._memo.get(name)

    def memo_set(self, name: str, value: Any) -> None:
        self._memo[name] = value

    def forget_memos(self) -> None:
        """Drop the memos: for a StateNode its ClusterState has replaced. Some hold the node itself (its slot base,
        its assessment's Candidate), and such a cycle would keep the old version, memos and all, in memory until a
        full collection (rare in the one-shot commands). Memos are caches: a holder that still reads one recomputes
        it."""
        self._memo.clear()

    # -- scheduling views ----------------------------------------------------------------------
    def requirements(self) -> Requirements:
        """The node's labels as requirements, hostname included (it may be missing on in-flight claims)."""
        requirements = self._requirements
        if requirements is None:
            requirements = Requirements.from_labels(self.labels)
            if wk.HOSTNAME not in self.labels:
                requirements = requirements.add(Requirement.single(wk.HOSTNAME, self.hostname))
            object.__setattr__(self, "_requirements", requirements)  # frozen: a memo, set once
        return requirements

    def room(self, daemon_pods: Sequence[Pod], fits: Callable[[Pod], bool]) -> Mapping[str, int]:
        """What pods may still use: allocatable minus bound pods' requests and the requests of the
        DaemonSet pods that ``fits`` says belong here but are not running yet. Memoized per identical
        pod list; callers copy before changing it."""
        pods = tuple(daemon_pods)
        memo = self._room
        if memo is not None and len(memo[0]) == len(pods) and all(a is b for a, b in zip(memo[0], pods, strict=True)):
            return memo[1]
        expected: dict[str, int] = {}
        for pod in pods:
            if fits(pod):
                for name, value in pod.scheduling_requests.items():
                    expected[name] = expected.get(name, 0) + value
        missing = (Resources(expected) - self.daemonset_requests).clamp_non_negative()
        room = dict(self.available - missing)
        for name in self.allocatable:
            room.setdefault(name, 0)
        object.__setattr__(self, "_room", (pods, room))
        return room

    @property
    def taints(self) -> tuple[Taint, ...]:
        if self.node is not None:
            return self.node.taints
        if self.nodeclaim is not None:
            return (*self.nodeclaim.taints, *self.nodeclaim.startup_taints)
        return ()

    def scheduling_taints(self) -> tuple[Taint, ...]:
        """Taints a pod must tolerate here: uninitialized managed nodes ignore startup and ephemeral taints."""
        taints = self.taints
        if self.managed and not self.initialized:
            startup = self.nodeclaim.startup_taints if self.nodeclaim else ()
            taints = tuple(
                t for t in taints if not is_ephemeral(t) and not any(s.matches(t) for s in startup)
            )
        return taints

    @property
    def available(self) -> Resources:
        """Allocatable minus what bound pods request (pods count one slot each)."""
        return self.allocatable - self.pod_requests

    def reschedulable_pods(self) -> list[Pod]:
        """Pods that would have to move if this node went away (not DaemonSet, static or finished)."""
        return [
            p for p in self.pods.values()
            if not p.is_daemonset_pod and not p.is_static and not p.is_terminal and not p.is_terminating
        ]

    def is_empty(self) -> bool:
        return not self.reschedulable_pods()


def _initialized(node: Node | None, nodeclaim: NodeClaim | None) -> bool:
    if node is None:
        return False
    if nodeclaim is not None:
        return nodeclaim.initialized or node.labels.get(wk.INITIALIZED) == "true"
    # Snapshot nodes without a claim: initialized once Ready (or labelled so).
    return node.labels.get(wk.INITIALIZED) == "true" or node.is_ready


def build_state_node(
    name: str,
    node: Node | None,
    nodeclaim: NodeClaim | None,
    pods: Mapping[str, Pod],
    *,
    marked: bool = False,
    nominated_until: datetime | None = None,
    pvc_drivers: Mapping[str, str] | None = None,
    volume_limits: Mapping[str, int] | None = None,
) -> StateNode:
    if node is not None:
        labels: dict[str, str] = dict(node.labels)
    elif nodeclaim is not None:
        labels = {**nodeclaim.requirements.single_values(), **nodeclaim.labels}
    else:
        labels = {}
    if node is not None and node.allocatable:
        capacity, allocatable = node.capacity or node.allocatable, node.allocatable
    elif nodeclaim is not None:
        capacity, allocatable = nodeclaim.capacity, nodeclaim.allocatable or nodeclaim.capacity
    else:
        capacity = allocatable = EMPTY
    active = {key: pod for key, pod in pods.items() if not pod.is_terminal}
    requests: dict[str, int] = {}
    daemon: dict[str, int] = {}
    ports: list[tuple[str, HostPort]] = []
    usage: dict[str, set[str]] = {}
    for key, pod in active.items():
        for resource, value in pod.scheduling_requests.items():
            requests[resource] = requests.get(resource, 0) + value
            if pod.is_daemonset_pod:
                daemon[resource] = daemon.get(resource, 0) + value
        ports.extend((key, port) for port in pod.host_ports)
        for volume in pod.volumes:
            claim = f"{pod.namespace}/{volume.claim_name}"
            driver = (pvc_drivers or {}).get(claim)
            if driver:
                usage.setdefault(driver, set()).add(claim)
    return StateNode(
        name=name,
        node=node,
        nodeclaim=nodeclaim,
        pods=dict(active),
        marked_for_deletion_flag=marked,
        nominated_until=nominated_until,
        labels=labels,
        capacity=capacity,
        allocatable=allocatable,
        pod_requests=Resources(requests),
        daemonset_requests=Resources(daemon),
        host_ports=tuple(ports),
        volume_usage={driver: frozenset(claims) for driver, claims in usage.items()},
        volume_limits=dict(volume_limits or {}),
    )
