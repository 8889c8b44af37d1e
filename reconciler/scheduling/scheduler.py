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

from bisect import bisect_left, insort
from collections import deque
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime
from heapq import merge

from reconciler.model.nodepool import NODES
from reconciler.model.pod import Pod
from reconciler.model.resources import CPU, MEMORY
from reconciler.scheduling.context import SchedulingContext
from reconciler.scheduling.existing import ExistingSlot, PlacementRefusal, SlotBase
from reconciler.scheduling.explain import GENERIC_INSTANCE_TYPE_FAILURES, explain
from reconciler.scheduling.limits import describe_remaining, limits_message, remaining_limits, subtract_max, within
from reconciler.scheduling.nodeclaim import ClaimOrder, NewNodeClaim, ReservedRefusal
from reconciler.scheduling.podinfo import PodClass, SchedulingPod
from reconciler.scheduling.reservations import ReservationLedger
from reconciler.scheduling.results import Attempt, SchedulingResult, finalize_claim
from reconciler.scheduling.room_index import RoomIndex
from reconciler.scheduling.templates import ClaimTemplate
from reconciler.scheduling.topology import TopologyError
from reconciler.scheduling.topology_group import ANTI_AFFINITY, TopologyGroup
from reconciler.scheduling.volumes import volume_requirements

_EPOCH = datetime.min


class Scheduler:
    def __init__(
        self,
        context: SchedulingContext,
        now: datetime,
        *,
        exclude_nodes: Collection[str] = (),
        pending_only_nodes: Collection[str] = (),
        scheduling_pods: Collection[str] = (),
        should_stop: Callable[[], bool] | None = None,
        memoize: bool = True,
        reserved_fallback: bool = True,
    ) -> None:
        """``exclude_nodes``: nodes treated as gone (disruption candidates); ``pending_only_nodes``: nodes that
        only take pending pods (inside consolidateAfter); ``scheduling_pods``: keys of the pods this run places
        (they are not counted by topology where they currently run). ``memoize=False`` turns off the
        "this candidate already refused this kind of pod" shortcuts (for tests proving they change nothing).
        ``reserved_fallback=False`` (provisioning): a pod that could use capacity reservations all held by this
        run's other claims waits instead of taking paid capacity or a lower-weight pool (see ``reservations``)."""
        self.context = context
        self.now = now
        self.settings = context.settings
        self.policy = self.settings.preference_policy
        self.relax_min_values = self.settings.min_values_policy == "BestEffort"
        self._should_stop = should_stop
        self._memoize = memoize
        self._pending_only = set(pending_only_nodes)
        excluded = set(exclude_nodes)
        self._deleting = context.deleting_nodes()
        self.topology = context.base_topology().fork(excluded_nodes=excluded, uncounted_pods=set(scheduling_pods))
        self.topology.domain_costs = context.domain_costs()
        # Nodes as placement candidates, in order (less ``excluded``): a run checks fits against the shared SlotBase
        # and makes its own ExistingSlot only on the first placement there (most nodes never get one); memos key
        # on the SlotBase. ``_room`` finds the bases with room for a pod without asking each one.
        self._bases = context.slot_bases()
        self._excluded = excluded
        self._by_room = memoize  # the index is asked for (built once per version of the nodes) on first need
        self._room: RoomIndex | None = None
        self._placed: dict[SlotBase, ExistingSlot] = {}
        self._placed_positions: list[int] = []  # positions in ``_bases`` of ``_placed``'s keys, ascending
        # (pod class, existing slot) -> why the slot last refused a pod of that class, for explanations.
        self._refusals: dict[tuple[int, int], str] = {}
        limited = any(template.nodepool.limits for template in context.templates)
        # Every node and in-flight claim counts against limits until its instance is gone: those being deleted
        # (draining, shutting down), marked as candidates of a command, or taken away by a disruption
        # simulation alike, so a replacement never takes the room of a node that is still there.
        self.remaining = remaining_limits(context.templates, context.state.state_nodes()) if limited else {}
        # What the existing nodes leave under each limit, before this run plans any claim (for messages).
        self._left_by_existing = {pool: dict(left) for pool, left in self.remaining.items()}
        self.new_claims: list[NewNodeClaim] = []
        self._claim_order = ClaimOrder()
        self._claim_number = 0
        self._classes: dict[tuple, PodClass] = {}
        self.reservations: ReservationLedger | None = None
        if self.settings.gate("ReservedCapacity") and any(t.reserved_types for t in context.templates):
            self.reservations = ReservationLedger(
                (info for t in context.templates for info in t.reserved_types), strict=not reserved_fallback
            )

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
        unscheduled = {key for key in errors} | {left.key for left in queue if left.key not in errors}
        by_number = sorted(self.new_claims, key=lambda c: c.number)
        claims = [finalize_claim(claim, self.context) for claim in by_number]
        context = self.context
        pending = {key: explain(errors.get(key), context.templates, context.skipped_pools) for key in unscheduled}
        return SchedulingResult.assemble(claims, placed_existing, pending, context.skipped_pools)

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
            if isinstance(outcome, Attempt) and self.topology.drop_preferences(sp):
                outcome = self._add(sp)  # a new affinity group's cheapest domains had no room: any domain will do
            if not isinstance(outcome, Attempt):
                return outcome
            if outcome.reserved:
                return outcome  # waiting for reserved capacity is not a reason to drop preferences
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
        rejected = cls.rejected_by if self._memoize else set()
        blockers = self._blockers(sp, cls, labels_key) if self._memoize else {}
        placed_on = self._existing(sp, cls, labels_key, attempt, pod_volumes, pending, rejected, blockers)
        if placed_on is not None:
            return placed_on
        for claim in self._claim_order:
            if claim in rejected or (blockers and _refused(blockers, claim)):
                continue
            accepted = claim.can_add(sp, cls, labels_key, self.topology)
            if isinstance(accepted, PlacementRefusal):
                self._remember(accepted, claim, rejected, blockers)
                attempt.inflight += 1
                continue
            claim.add(sp, labels_key, accepted, self.topology)
            self._claim_order.grew(claim)
            return None
        refused_by_pool = cls.template_rejections
        for template in self.context.templates:
            if self._memoize and template.name in refused_by_pool:
                attempt.templates[template.name] = refused_by_pool[template.name]
                continue
            outcome = self._new_claim(template, sp, cls, labels_key)
            if isinstance(outcome, ReservedRefusal):
                # Reserved capacity exists for the pod in this pool: never fall back to a lower-weight pool.
                attempt.templates[template.name] = outcome.message
                attempt.reserved = True
                return attempt
            if isinstance(outcome, PlacementRefusal):
                attempt.templates[template.name] = outcome.message
                if outcome.monotone and self._memoize:
                    # A fresh claim only gets harder to satisfy (limits shrink): skip this pool for the class.
                    refused_by_pool[template.name] = outcome.message
                continue
            return None
        return attempt

    def _existing(self, sp: SchedulingPod, cls: PodClass, labels_key: frozenset[tuple[str, str]], attempt: Attempt,
                  pod_volumes: dict[str, set[str]], pending: bool, rejected: set[object],
                  blockers: dict[TopologyGroup, tuple]) -> str | None:
        """The first existing node that takes the pod (its name), else None with ``attempt`` saying why (the
        first three refusals in node order)."""
        refuse_moved, excluded, messages = self._pending_only, self._excluded, attempt.existing
        skips = cls.room_skips
        for position, base in enumerate(self._bases):
            if len(messages) >= 3 and self._by_room:
                # No more refusals are listed: the nodes without room for the pod refuse it whatever else they
                # are, so only those with room (and those this run already placed pods on) are asked.
                return self._existing_by_room(sp, cls, labels_key, position, pod_volumes, pending, rejected,
                                              blockers)
            if excluded and base.name in excluded:
                continue
            if base in rejected or (blockers and _refused(blockers, base)) or (
                    skips and self._skipped_for_room(cls, position, base, rejected)):
                # Skipped by a memoized refusal; the explanation still names the node and why (the first three).
                if len(messages) < 3:
                    message = self._refusals.get((id(cls), id(base)))
                    if message is not None:
                        messages.append(message)
                continue
            if refuse_moved and not pending and base.name in refuse_moved:
                continue
            if self._try_base(sp, cls, labels_key, base, pod_volumes, rejected, blockers, messages):
                return base.name
        return None

    def _try_base(self, sp: SchedulingPod, cls: PodClass, labels_key: frozenset[tuple[str, str]], base: SlotBase,
                  pod_volumes: dict[str, set[str]], rejected: set[object], blockers: dict[TopologyGroup, tuple],
                  messages: list[str]) -> bool:
        """Place the pod on ``base`` if it takes it; else remember why it refused."""
        placed = self._placed
        slot = placed.get(base, base)
        result = slot.can_add(sp, cls, labels_key, self.topology, pod_volumes)
        if isinstance(result, PlacementRefusal):
            self._remember(result, base, rejected, blockers)
            self._refusals[id(cls), id(base)] = result.message
            if len(messages) < 3:
                messages.append(result.message)
            return False
        if not isinstance(slot, ExistingSlot):
            slot = placed[base] = ExistingSlot.of(base)
            if self._room is not None:  # else taken from ``_placed`` when the index is first asked for
                insort(self._placed_positions, self._room.position(base))
        slot.add(sp, cls, labels_key, result, self.topology, pod_volumes)
        return True

    def _existing_by_room(self, sp: SchedulingPod, cls: PodClass, labels_key: frozenset[tuple[str, str]],
                          start: int, pod_volumes: dict[str, set[str]], pending: bool, rejected: set[object],
                          blockers: dict[TopologyGroup, tuple]) -> str | None:
        """``_existing`` from ``start`` on, asking only the bases with room for the pod's requests and those
        this run placed pods on (whose room is less than their base's, and whose refusal may say otherwise).
        A base this run placed pods on is asked whatever its room says; any other base without room for every
        request is passed over. The bases passed over are recorded on the class, so a later try that lists
        refusals can say what each would have answered (``_skipped_for_room``)."""
        if self._room is None:
            self._room = self.context.room_index()
            self._placed_positions = sorted(map(self._room.position, self._placed))
        bases, excluded, refuse_moved = self._bases, self._excluded, self._pending_only
        room, requests = self._room, cls.requests
        with_room = room.with_room(requests)
        candidates: Iterable[int] = with_room[bisect_left(with_room, start):]
        placed_positions = self._placed_positions[bisect_left(self._placed_positions, start):]
        if placed_positions:
            candidates = merge(candidates, placed_positions)
        end, last, found = len(bases), -1, None
        no_messages: list[str] = ["", "", ""]  # already three: the tries below list no refusal
        for position in candidates:
            if position == last:
                continue
            last = position
            base = bases[position]
            if excluded and base.name in excluded:
                continue
            if base in rejected:
                continue  # refused a pod of this class before (checked first: a set lookup)
            if blockers and _refused(blockers, base):
                continue
            if refuse_moved and not pending and base.name in refuse_moved:
                continue
            if self._try_base(sp, cls, labels_key, base, pod_volumes, rejected, blockers, no_messages):
                end, found = position, base.name
                break
        cls.room_skips.append((start, end, sp.copy(), labels_key, pod_volumes))
        return found

    def _skipped_for_room(self, cls: PodClass, position: int, base: SlotBase, rejected: set[object]) -> bool:
        """Whether an earlier try of this class passed ``base`` over for lack of room; if so the base is now
        rejected for the class, with the refusal it would have given that try."""
        assert self._room is not None
        if self._room.holds(position, cls.requests):
            return False
        for start, end, tried, labels_key, pod_volumes in cls.room_skips:
            if start <= position < end:
                refusal = base.can_add(tried, cls, labels_key, self.topology, pod_volumes)
                assert isinstance(refusal, PlacementRefusal)  # it lacks room: refused before any topology check
                rejected.add(base)
                self._refusals[id(cls), id(base)] = refusal.message
                return True
        return False

    def _blockers(self, sp: SchedulingPod, cls: PodClass,
                  labels_key: frozenset[tuple[str, str]]) -> dict[TopologyGroup, tuple]:
        """The pod's own spread/affinity groups, each with the key under which it memoizes refusals."""
        alternatives = sp.volume_alternatives
        if alternatives is not None and len(alternatives) != 1:
            return {}
        alternative = alternatives[0] if alternatives else None
        blockers = {}
        pod = sp.pod
        for group in self.topology.owned_groups(sp.key):
            if group.kind == ANTI_AFFINITY:
                continue  # anti-affinity refusals are monotone: the class memo covers them
            blockers[group] = (
                group.selects(pod.namespace, pod.labels, labels_key),
                cls.strict_requirements.get(group.key),
                cls.requirements.get(group.key),
                alternative.get(group.key) if alternative is not None else None,
            )
        return blockers

    @staticmethod
    def _remember(result: PlacementRefusal, candidate: object, rejected: set[object],
                  blockers: dict[TopologyGroup, tuple]) -> None:
        if result.monotone:
            rejected.add(candidate)
        elif isinstance(result.detail, TopologyError):
            key = blockers.get(result.detail.group)
            if key is not None:
                result.detail.group.remember_refusal(key, candidate)

    def _new_claim(self, template: ClaimTemplate, sp: SchedulingPod, cls: PodClass,
                   labels_key: frozenset[tuple[str, str]]) -> NewNodeClaim | PlacementRefusal:
        options = template.types_by_size
        remaining = self.remaining.get(template.name)
        if remaining is not None:
            if NODES in remaining and remaining[NODES] <= 0:
                return PlacementRefusal(f"limits.nodes {template.nodepool.limits[NODES] // 1000} reached")
            if not all(name == NODES or template.max_capacity.get(name, 0) <= left
                       for name, left in remaining.items()):
                options = [t for t in options if within(t.capacity, remaining)]
            if not options:
                return PlacementRefusal(limits_message(template, remaining, self._left_by_existing[template.name]))
        claim = NewNodeClaim(template, options, self._claim_number + 1, self.reservations)
        result = claim.can_add(sp, cls, labels_key, self.topology, relax_min_values=self.relax_min_values)
        if isinstance(result, PlacementRefusal):
            if len(options) < len(template.types_by_size) and result.message in GENERIC_INSTANCE_TYPE_FAILURES:
                return PlacementRefusal(
                    f"no instance type fits among the {len(options)} of {len(template.types_by_size)} that stay "
                    f"within the NodePool's remaining limits ({describe_remaining(template, remaining or {})})",
                    result.monotone,
                )
            return result
        self._claim_number += 1
        claim.add(sp, labels_key, result, self.topology)
        self.new_claims.append(claim)
        self._claim_order.add(claim)
        if remaining is not None:
            subtract_max(claim, remaining, result.options)
        return claim

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


def _refused(blockers: dict[TopologyGroup, tuple], candidate: object) -> bool:
    return any(group.refuses(key, candidate) for group, key in blockers.items())


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


