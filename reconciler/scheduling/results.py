"""The outcome of a scheduling run: finalized NodeClaims, placements on existing nodes, pending reasons."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler.cloud.types import InstanceType
from reconciler.model import labels as wk
from reconciler.model.nodepool import NodePool
from reconciler.model.pod import Pod
from reconciler.model.requirements import ALLOW_UNDEFINED_WELL_KNOWN, Requirement, Requirements
from reconciler.model.resources import Resources
from reconciler.model.taints import Taint
from reconciler.scheduling.instancetypes import TypeInfo, min_values_shortfall
from reconciler.scheduling.podinfo import SchedulingPod

if TYPE_CHECKING:
    from reconciler.scheduling.context import SchedulingContext
    from reconciler.scheduling.nodeclaim import NewNodeClaim

_SIMULATION_KEYS = frozenset({wk.REGISTERED, wk.INITIALIZED})


@dataclass(slots=True)
class Attempt:
    """Why the last try of a pod failed, per candidate kind (kept to explain pending pods)."""

    pod: SchedulingPod | None = None
    existing: list[str] = field(default_factory=list)
    inflight: int = 0
    templates: dict[str, str] = field(default_factory=dict)
    reserved: bool = False  # deferred to keep reserved capacity (provisioning's strict mode)


@dataclass(slots=True)
class ScheduledClaim:
    """A NodeClaim the run decided to launch, ready to be written out (see ``provisioning``)."""

    nodepool: NodePool
    pods: list[Pod]
    requirements: Requirements  # final: instance-type In [...] and capacity-type In [...] included
    instance_types: list[InstanceType]  # cheapest compatible available offering first
    prices: list[float]  # that cheapest price, per instance type
    requests: Resources  # pods + the smallest DaemonSet overhead among the options
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    startup_taints: tuple[Taint, ...]
    min_values_relaxed: bool = False
    error: str | None = None  # set when truncating the options broke minValues (Strict)

    @property
    def instance_type_names(self) -> list[str]:
        return [it.name for it in self.instance_types]

    @property
    def pod_keys(self) -> list[str]:
        return [pod.key for pod in self.pods]

    @property
    def capacity_types(self) -> list[str]:
        requirement = self.requirements.get(wk.CAPACITY_TYPE)
        return sorted(requirement.values) if requirement is not None and not requirement.complement else []

    def cheapest_price(self) -> float:
        return self.prices[0] if self.prices else float("inf")


@dataclass(slots=True)
class SchedulingResult:
    new_claims: list[ScheduledClaim]
    existing: dict[str, str]  # pod key -> existing / in-flight node name
    errors: dict[str, str]  # pod key -> human-readable reason
    events: list[dict[str, str]] = field(default_factory=list)

    def pods_on_existing(self) -> dict[str, list[str]]:
        placed: dict[str, list[str]] = {}
        for pod, node in self.existing.items():
            placed.setdefault(node, []).append(pod)
        return placed

    def all_scheduled(self, keys: Any = None) -> bool:
        """True when none of ``keys`` (default: any pod) failed to schedule."""
        if keys is None:
            return not self.errors
        return not any(key in self.errors for key in keys)

    @classmethod
    def assemble(
        cls,
        claims: list[ScheduledClaim],
        existing: dict[str, str],
        pending: dict[str, str],
        skipped_pools: dict[str, str],
    ) -> SchedulingResult:
        """The result from a run's values: finalized claims, placements on existing nodes, why each pod left
        unscheduled is pending, and NodePools left out (no compatible instance types)."""
        errors: dict[str, str] = {}
        kept: list[ScheduledClaim] = []
        for claim in claims:
            if claim.error is None:
                kept.append(claim)
                continue
            for pod in claim.pods:
                errors[pod.key] = claim.error
        for key in sorted(pending):
            errors[key] = pending[key]
        events = [
            {"object": f"Pod/{key}", "reason": "FailedScheduling", "message": reason}
            for key, reason in sorted(errors.items())
        ]
        events.extend(
            {"object": f"NodePool/{name}", "reason": "NoCompatibleInstanceTypes", "message": reason}
            for name, reason in sorted(skipped_pools.items())
        )
        return cls(kept, existing, errors, events)


def finalize_claim(claim: NewNodeClaim, context: SchedulingContext) -> ScheduledClaim:
    """Drop the hostname placeholder, order and truncate the options, add DaemonSet overhead, pin types."""
    settings = context.settings
    final = claim.requirements.without(wk.HOSTNAME)
    reservations = claim.reservations
    if reservations:
        # Launch into one of the reservations the run held for this claim, and nothing else (Karpenter pins
        # the claim to reserved so a later demotion to on-demand shows as drift).
        final = final.add(
            Requirement.single(wk.CAPACITY_TYPE, wk.CAPACITY_TYPE_RESERVED),
            Requirement(wk.CAPACITY_RESERVATION_ID, False, reservations),
        )
    options = claim.ordered_options(context.eligible_types(claim.template, final))[: settings.max_instance_types]
    kept: list[TypeInfo] = [e.info for e in options]
    prices = [e.price for e in options]
    error = None
    relaxed = claim.min_values_relaxed
    shortfall = min_values_shortfall(kept, final)
    if shortfall:
        if settings.min_values_policy == "BestEffort":
            final = final.replacing(*(final[key].with_min_values(have) for key, (_, have) in shortfall.items()))
            relaxed = True
        else:
            parts = ", ".join(f"{k} needs {want} values, {have} remain" for k, (want, have) in shortfall.items())
            error = (
                f"NodePool {claim.nodepool} could not meet minValues after keeping the "
                f"{settings.max_instance_types} cheapest instance types ({parts})"
            )
    overhead = claim.daemon_overhead(kept)
    requests = Resources(claim.requests) + overhead
    capacity_types = sorted(set().union(*(e.capacity_types for e in options)))
    type_key = final.get(wk.INSTANCE_TYPE)
    type_requirement = Requirement(
        wk.INSTANCE_TYPE, False, frozenset(info.name for info in kept),
        min_values=type_key.min_values if type_key else None,
    )
    pinned = [type_requirement]
    if capacity_types:
        pinned.append(Requirement(wk.CAPACITY_TYPE, False, frozenset(capacity_types)))
    final = final.add(*pinned)
    labels = dict(claim.template.labels)
    labels.update(custom_labels(final, claim.template.requirements))
    return ScheduledClaim(
        nodepool=claim.template.nodepool,
        pods=[sp.pod for sp in claim.pods],
        requirements=final.without(*_SIMULATION_KEYS),
        instance_types=[info.instance_type for info in kept],
        prices=prices,
        requests=requests,
        labels=labels,
        taints=claim.template.taints,
        startup_taints=claim.template.nodepool.startup_taints,
        min_values_relaxed=relaxed,
        error=error,
    )


def custom_labels(requirements: Requirements, template: Requirements) -> dict[str, str]:
    """Single values for custom (not well-known, not restricted) keys, so the node carries them."""
    labels = {}
    for key, requirement in requirements.items():
        if key in ALLOW_UNDEFINED_WELL_KNOWN or key in _SIMULATION_KEYS or key == wk.HOSTNAME:
            continue
        if key.partition("/")[0] in (wk.GROUP,) or key.partition("/")[0].endswith("." + wk.GROUP):
            continue
        if requirement.complement and key not in template:
            continue  # a pod's NotIn/DoesNotExist on a key the pool never sets: leave the label off
        value = requirement.any_value()
        if value is not None:
            labels[key] = value
    return labels

