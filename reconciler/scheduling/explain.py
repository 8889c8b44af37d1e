"""Human-readable reasons for pods left pending, naming the blocker with numbers.

Computed only for pods that end unscheduled, from the record of their last
(fully relaxed) attempt, so the fast path pays nothing for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.model.quantity import format_quantity
from reconciler.model.requirements import ALLOW_UNDEFINED_WELL_KNOWN
from reconciler.scheduling.instancetypes import TypeInfo
from reconciler.scheduling.nodeclaim import readable_placeholders
from reconciler.scheduling.podinfo import SchedulingPod
from reconciler.scheduling.results import Attempt
from reconciler.scheduling.templates import ClaimTemplate

GENERIC_INSTANCE_TYPE_FAILURES = ("no instance type matched", "no instance type has room")


def explain(attempt: Attempt | None, templates: Sequence[ClaimTemplate], skipped_pools: Mapping[str, str]) -> str:
    """Why a pod is pending, from its last attempt, the run's NodePool templates and the pools left out."""
    if attempt is None:
        return "not attempted: the scheduling run stopped before reaching this pod"
    parts: list[str] = []
    if attempt.existing:
        shown = "; ".join(attempt.existing)
        parts.append(f"did not fit existing nodes ({shown})")
    if attempt.inflight:
        parts.append(f"did not fit {attempt.inflight} NodeClaim(s) planned in this run")
    by_name = {t.name: t for t in templates}
    for name, reason in attempt.templates.items():
        template = by_name.get(name)
        if template is not None and attempt.pod is not None and reason in GENERIC_INSTANCE_TYPE_FAILURES:
            reason = diagnose_instance_types(template, attempt.pod)
        parts.append(f"NodePool {name}: {reason}" if name else reason)
    for name, reason in sorted(skipped_pools.items()):
        parts.append(reason if reason.startswith("NodePool") else f"NodePool {name}: {reason}")
    if not templates and not skipped_pools:
        parts.append("no NodePool exists")
    return readable_placeholders("; ".join(parts)) or "no placement found"


def diagnose_instance_types(template: ClaimTemplate, sp: SchedulingPod) -> str:
    """Which of requirements / resources / offerings ruled the pool's instance types out, with numbers."""
    cls = sp.cls
    assert cls is not None
    requirements = template.requirements
    if requirements.incompatibility(cls.requirements, ALLOW_UNDEFINED_WELL_KNOWN) is None:
        requirements = requirements.merge(cls.requirements)
    if sp.volume_alternatives:
        requirements = requirements.merge(sp.volume_alternatives[0])
    compatible: list[TypeInfo] = []
    fitting = with_offering = 0
    largest: TypeInfo | None = None
    for info in template.types:
        group = template.daemon_groups[template.group_index[info.name]]
        total = dict(cls.requests)
        for name, value in group.overhead.items():
            total[name] = total.get(name, 0) + value
        ok_requirements = info.compatible(requirements)
        ok_fit = info.fits(total)
        ok_offering = info.has_offering(requirements)
        fitting += ok_fit
        with_offering += ok_offering
        if ok_requirements:
            compatible.append(info)
            if largest is None or _size(info) > _size(largest):
                largest = info
        if ok_requirements and ok_fit and ok_offering:
            return (
                f"instance type {info.name} would fit the pod alone, but not together with the pods already "
                "planned alongside it (limits, topology or host ports)"
            )
    requests = _describe(cls.requests)
    overheads = [g.overhead for g in template.daemon_groups if g.overhead]
    daemon = f" plus DaemonSet overhead up to {_describe(_max(overheads))}" if overheads else ""
    count = len(template.types)
    if not compatible:
        return f"none of its {count} instance types meets the requirements ({requirements})"
    absent = sorted(
        r for r, v in cls.requests.items() if v > 0 and not any(i.allocatable.get(r, 0) for i in compatible)
    )
    if absent:
        return (f"none of the {len(compatible)} instance types meeting the requirements offers "
                f"{', '.join(absent)} (the pod requests {requests})")
    if fitting == 0 or (largest is not None and not any(
        i.fits(cls.requests) for i in compatible
    )):
        assert largest is not None
        hint = " (CPU request of 1 million cores or more: m vs M typo?)" if cls.requests.get("cpu", 0) >= 10**9 else ""
        return (
            f"no instance type has enough resources: the pod needs {requests}{daemon}; the largest of the "
            f"{len(compatible)} compatible types, {largest.name}, has {_describe(largest.allocatable)} "
            f"allocatable{hint}"
        )
    if with_offering == 0:
        return f"no instance type has an available offering for {requirements}"
    return (
        f"no instance type meets the requirements ({requirements}), has room for {requests}{daemon} "
        f"and an available offering at the same time ({len(compatible)} of {count} meet the requirements, "
        f"{fitting} have room, {with_offering} have an offering)"
    )


def _size(info: TypeInfo) -> tuple[int, int]:
    return info.allocatable.get("cpu", 0), info.allocatable.get("memory", 0)


def _max(amounts: list[dict[str, int]]) -> dict[str, int]:
    result: dict[str, int] = {}
    for item in amounts:
        for name, value in item.items():
            result[name] = max(result.get(name, 0), value)
    return result


def _describe(amounts: dict[str, int]) -> str:
    order = {"cpu": 0, "memory": 1, "pods": 9}
    names = sorted((n for n, v in amounts.items() if v), key=lambda n: (order.get(n, 5), n))
    return ", ".join(f"{name} {format_quantity(amounts[name], name)}" for name in names) or "nothing"
