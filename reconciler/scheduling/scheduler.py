"""The scheduling simulation: place pods on existing nodes, planned NodeClaims or new NodeClaims.

Karpenter's algorithm, pure and synchronous. Pods are queued by CPU, memory,
age; each is tried on (a) existing and in-flight nodes (initialized first, then
by name), (b) NodeClaims planned in this run (fewest pods first), (c) a new
NodeClaim from the first NodePool template (weight order) that accepts it.
A pod that fits nowhere is relaxed one preference at a time; if it still fails
the unrelaxed pod goes to the back of the queue, and the run stops once a full
pass over the queue makes no progress.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from reconciler.model.nodepool import NODES
from reconciler.model.pod import Pod
from reconciler.model.quantity import format_quantity
from reconciler.model.requirements import Requirements
from reconciler.model.resources import CPU, MEMORY, Resources
from reconciler.scheduling.context import SchedulingContext
from reconciler.scheduling.existing import ExistingSlot, Rejection
from reconciler.scheduling.nodeclaim import Acceptance, NewNodeClaim
from reconciler.scheduling.podinfo import PodClass, SchedulingPod
from reconciler.scheduling.results import SchedulingResult, finalize_claim
from reconciler.scheduling.templates import ClaimTemplate
from reconciler.scheduling.topology import CountedPod, Topology
from reconciler.scheduling.volumes import volume_requirements

_EPOCH = datetime.min


@dataclass(slots=True)
class Attempt:
    """Why the last try of a pod failed, per candidate kind (kept to explain pending pods)."""

    pod: SchedulingPod | None = None
    existing: list[str] = field(default_factory=list)
    inflight: int = 0
    templates: dict[str, str] = field(default_factory=dict)


class Scheduler:
    def __init__(
        self,
        context: SchedulingContext,
        now: datetime,
        *,
        exclude_nodes: Collection[str] = (),
        refuse_moved_pods: Collection[str] = (),
        scheduling_pods: Collection[str] = (),
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        """``exclude_nodes``: nodes treated as gone (disruption candidates); ``refuse_moved_pods``: nodes that
        only take pending pods (inside consolidateAfter); ``scheduling_pods``: keys of the pods this run places
        (they are not counted by topology where they currently run)."""
        self.context = context
        self.now = now
        self.settings = context.settings
        self.policy = self.settings.preference_policy
        self.relax_min_values = self.settings.min_values_policy == "BestEffort"
        self._should_stop = should_stop
        self._refuse_moved = set(refuse_moved_pods)
        state = context.state
        excluded = set(exclude_nodes)
        active = [n for n in state.state_nodes() if not n.marked_for_deletion and n.name not in excluded]
        self._deleting = {n.name for n in state.state_nodes() if n.marked_for_deletion}
        self.topology = self._build_topology(active, set(scheduling_pods))
        self.existing = [ExistingSlot.of(n, context.daemon_pods, self.topology, n.name in self._refuse_moved)
                         for n in active]
        self.existing.sort(key=lambda slot: (not slot.state.initialized, slot.name))
        self.remaining = self._remaining_limits(active)
        self.new_claims: list[NewNodeClaim] = []
        self._claim_number = 0
        self._classes: dict[tuple, PodClass] = {}
        self.attempts: dict[str, Attempt] = {}

    # -- setup ---------------------------------------------------------------------------------

    def _build_topology(self, active: Sequence, scheduling: set[str]) -> Topology:
        state = self.context.state
        counted: list[CountedPod] = []
        nodes = []
        by_name = {n.name: n for n in state.state_nodes()}
        for node in active:
            nodes.append((node.labels, node.taints, Requirements.from_labels(node.labels)))
        node_requirements: dict[str, Requirements] = {}
        for pod in state.bound_pods():
            if pod.key in scheduling or not pod.is_active:
                continue
            node = by_name.get(pod.node_name)
            if node is None:
                continue
            reqs = node_requirements.get(node.name)
            if reqs is None:
                reqs = node_requirements[node.name] = Requirements.from_labels(node.labels)
            counted.append(CountedPod(pod, node.labels, node.taints, reqs, node.name))
        namespaces = {name: state.namespace_labels(name) for name in
                      {*state.namespaces, *(c.pod.namespace for c in counted)}}
        return Topology(
            domain_sources=self.context.domain_sources,
            counted_pods=counted,
            node_domains=nodes,
            namespace_labels=namespaces,
            policy=self.policy,
        )

    def _remaining_limits(self, active: Sequence) -> dict[str, dict[str, int]]:
        remaining: dict[str, dict[str, int]] = {}
        for template in self.context.templates:
            limits = template.nodepool.limits
            if not limits:
                continue
            left = dict(limits)
            for node in active:
                if node.nodepool != template.name:
                    continue
                for name in left:
                    left[name] -= 1000 if name == NODES else node.capacity.amount(name)
            remaining[template.name] = left
        return remaining

    # -- the run -------------------------------------------------------------------------------

    def solve(self, pods: Sequence[Pod]) -> SchedulingResult:
        state = self.context.state
        queue: deque[SchedulingPod] = deque()
        for pod in pods:
            sp = SchedulingPod.of(pod, self.policy, volume_requirements(pod, state) if pod.volumes else None)
            self.topology.update(sp)
            self._assign_class(sp)
            queue.append(sp)
        ordered = sorted(queue, key=_queue_key)
        queue = deque(ordered)
        last_len: dict[str, int] = {}
        errors: dict[str, Attempt] = {}
        placed_existing: dict[str, str] = {}
        while queue:
            if self._should_stop is not None and self._should_stop():
                break
            sp = queue[0]
            if last_len.get(sp.key) == len(queue):
                break
            queue.popleft()
            attempt = self._try_schedule(sp.copy())
            if isinstance(attempt, Attempt):
                errors[sp.key] = attempt
                self.topology.update(sp)
                self._assign_class(sp)
                queue.append(sp)
                last_len[sp.key] = len(queue)
            else:
                errors.pop(sp.key, None)
                if attempt is not None:
                    placed_existing[sp.key] = attempt
        unscheduled = {key for key in errors} | {sp.key for sp in queue if sp.key not in errors}
        ordered = sorted(self.new_claims, key=lambda c: c.number)
        claims = [finalize_claim(claim, self.context) for claim in ordered]
        return SchedulingResult.assemble(self, claims, placed_existing, unscheduled, errors)

    def _assign_class(self, sp: SchedulingPod) -> None:
        key = sp.class_key()
        cls = self._classes.get(key)
        if cls is None:
            cls = sp.build_class()
            self._classes[key] = cls
        sp.cls = cls

    def _try_schedule(self, sp: SchedulingPod) -> str | Attempt | None:
        """Place ``sp`` (relaxing it as needed). Returns the existing node name, None for a NodeClaim, or the
        failed ``Attempt``."""
        while True:
            outcome = self._add(sp)
            if not isinstance(outcome, Attempt):
                return outcome
            if sp.relax(self.context.tolerate_prefer_no_schedule) is None:
                return outcome
            self.topology.update(sp)
            self._assign_class(sp)

    def _add(self, sp: SchedulingPod) -> str | Attempt | None:
        cls = sp.cls
        assert cls is not None
        labels_key = frozenset(sp.pod.labels.items())
        attempt = Attempt(sp)
        pod_volumes = self._pod_volumes(sp.pod)
        pending = sp.pod.node_name == "" or sp.pod.node_name in self._deleting
        rejected = cls.rejected_by
        for slot in self.existing:
            if slot in rejected:
                continue
            if slot.under_consolidate_after and not pending:
                continue
            result = slot.can_add(sp, cls, labels_key, self.topology, pod_volumes)
            if isinstance(result, Rejection):
                if result.monotone:
                    rejected.add(slot)
                if len(attempt.existing) < 3:
                    attempt.existing.append(result.message)
                continue
            slot.add(sp, cls, labels_key, result, self.topology, pod_volumes)
            return slot.name
        self.new_claims.sort(key=lambda c: len(c.pods))
        for claim in self.new_claims:
            if claim in rejected:
                continue
            result = claim.can_add(sp, cls, labels_key, self.topology)
            if isinstance(result, Rejection):
                if result.monotone:
                    rejected.add(claim)
                attempt.inflight += 1
                continue
            claim.add(sp, labels_key, result, self.topology)
            return None
        for template in self.context.templates:
            outcome = self._new_claim(template, sp, cls, labels_key)
            if isinstance(outcome, str):
                attempt.templates[template.name] = outcome
                continue
            return None
        if not self.context.templates:
            attempt.templates[""] = "no NodePool can launch capacity"
        return attempt

    def _new_claim(self, template: ClaimTemplate, sp: SchedulingPod, cls: PodClass,
                   labels_key: frozenset[tuple[str, str]]) -> NewNodeClaim | str:
        options = template.types
        remaining = self.remaining.get(template.name)
        if remaining is not None:
            if NODES in remaining and remaining[NODES] <= 0:
                return f"limits.nodes {template.nodepool.limits[NODES] // 1000} reached"
            options = [t for t in options if _within(t.capacity, remaining)]
            if not options:
                return _limits_message(template, remaining)
        claim = NewNodeClaim(template, options, self._claim_number + 1)
        result = claim.can_add(sp, cls, labels_key, self.topology, relax_min_values=self.relax_min_values)
        if isinstance(result, Rejection):
            return result.message
        self._claim_number += 1
        claim.add(sp, labels_key, result, self.topology)
        self.new_claims.append(claim)
        if remaining is not None:
            self._subtract_max(claim, remaining, result)
        return claim

    def _subtract_max(self, claim: NewNodeClaim, remaining: dict[str, int], accepted: Acceptance) -> None:
        """Pessimistically reserve the largest capacity among the claim's options (Karpenter's subtractMax)."""
        options = accepted.options if accepted.options is not None else claim.filter_options()
        for name in list(remaining):
            if name == NODES:
                remaining[name] -= 1000  # Adze also counts planned claims against limits.nodes
                continue
            remaining[name] -= max((t.capacity.amount(name) for t in options), default=0)

    def _pod_volumes(self, pod: Pod) -> dict[str, set[str]]:
        if not pod.volumes:
            return {}
        drivers = self.context.pvc_drivers()
        usage: dict[str, set[str]] = {}
        for volume in pod.volumes:
            claim = f"{pod.namespace}/{volume.claim_name}"
            driver = drivers.get(claim)
            if driver:
                usage.setdefault(driver, set()).add(claim)
        return usage


def _limits_message(template: ClaimTemplate, remaining: dict[str, int]) -> str:
    """Which limits every instance type would breach, e.g. ``limits cpu 16, remaining 0 (smallest type 2)``."""
    limits = template.nodepool.limits
    parts = []
    for name, left in sorted(remaining.items()):
        if name == NODES:
            continue
        smallest = min(t.capacity.amount(name) for t in template.types)
        if smallest > left:
            parts.append(
                f"{name} limit {format_quantity(limits.amount(name), name)}, remaining "
                f"{format_quantity(max(left, 0), name)} after existing nodes and NodeClaims planned in this run "
                f"(smallest instance type has {format_quantity(smallest, name)})"
            )
    detail = "; ".join(parts) or "the remaining limits"
    return f"all instance types would exceed the NodePool's limits: {detail}"


def _within(capacity: Resources, remaining: dict[str, int]) -> bool:
    return all(name == NODES or capacity.amount(name) <= left for name, left in remaining.items())


def _queue_key(sp: SchedulingPod) -> tuple:
    cls = sp.cls
    assert cls is not None
    created = sp.pod.creation_timestamp
    return (
        -cls.requests.get(CPU, 0),
        -cls.requests.get(MEMORY, 0),
        created.replace(tzinfo=None) if created else _EPOCH,
        sp.pod.uid,
    )


