"""NodePool disruption budgets: how many nodes of a pool may be disrupted right now, and why.

A budget limits disruptions per NodePool and reason (Empty, Underutilized,
Drifted). ``nodes`` is a count or a percentage of the pool's nodes rounded up;
a budget with ``schedule`` + ``duration`` is only active for ``duration`` after
each cron hit (UTC). The pool's limit is the minimum over the active budgets
that cover the reason; nodes already disrupting (NotReady, deleting or marked
for deletion) use it up. A budget that cannot be evaluated fails closed (0).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.api.cron import cron_problem, next_activation, window_is_active
from reconciler.model.durations import DurationError, format_duration_short, parse_duration

# Disruption reasons: budgets select by them, commands and result documents carry them, and each method
# (``reconciler.disruption.methods``) has one.
REASON_EMPTY = "Empty"
REASON_UNDERUTILIZED = "Underutilized"
REASON_DRIFTED = "Drifted"
DISRUPTION_REASONS = (REASON_EMPTY, REASON_UNDERUTILIZED, REASON_DRIFTED)

# Karpenter's "no limit" (math.MaxInt32); kept an int so budgets compose with min().
UNLIMITED = 2**31 - 1

DEFAULT_BUDGETS: tuple[Mapping[str, Any], ...] = ({"nodes": "10%"},)

_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")


class BudgetError(ValueError):
    """A budget that cannot be evaluated; the message names the field path."""


@dataclass(slots=True, frozen=True)
class Budget:
    nodes: str = "10%"
    schedule: str | None = None
    duration: float | None = None  # seconds
    reasons: frozenset[str] | None = None  # None = every reason
    path: str = "spec.disruption.budgets[0]"

    @classmethod
    def from_manifest(cls, raw: Any, *, path: str = "spec.disruption.budgets[0]") -> Budget:
        """Read one ``spec.disruption.budgets[]`` entry; shape errors raise ``BudgetError`` with the path."""
        if hasattr(raw, "model_dump"):  # a pydantic API model
            raw = raw.model_dump(by_alias=True, exclude_none=True)
        if not isinstance(raw, Mapping):
            raise BudgetError(f"{path}: expected a map")
        nodes = str(raw.get("nodes", "10%"))
        schedule = raw.get("schedule")
        duration_text = raw.get("duration")
        duration: float | None = None
        if duration_text is not None:
            if isinstance(duration_text, (int, float)):
                duration = float(duration_text)
            else:
                try:
                    duration = parse_duration(str(duration_text), path=f"{path}.duration")
                except DurationError as err:
                    raise BudgetError(str(err)) from None
            if duration < 0:
                raise BudgetError(f"{path}.duration: {duration_text!r} must not be negative")
        reasons_raw = raw.get("reasons")
        reasons: frozenset[str] | None = None
        if reasons_raw is not None:
            if not isinstance(reasons_raw, Sequence) or isinstance(reasons_raw, str):
                raise BudgetError(f"{path}.reasons: expected a list of {', '.join(DISRUPTION_REASONS)}")
            reasons = frozenset(str(r) for r in reasons_raw)
        return cls(
            nodes=nodes,
            schedule=None if schedule is None else str(schedule),
            duration=duration,
            reasons=reasons,
            path=path,
        )

    def covers(self, reason: str) -> bool:
        return self.reasons is None or reason in self.reasons

    def is_active(self, now: datetime) -> bool:
        """Whether the budget applies at ``now``: unscheduled budgets always do.

        A scheduled budget is active iff its latest cron hit at or before ``now``
        lies within ``duration``: equivalently, the first hit after
        ``now - duration`` is not after ``now``.
        """
        if self.schedule is None and self.duration is None:
            return True
        if self.schedule is None or self.duration is None:
            raise BudgetError(f"{self.path}: schedule and duration must be set together")
        if now.tzinfo is None:  # a caller's bug, not a bad budget: do not fail closed on it
            raise ValueError("now must be timezone-aware (UTC)")
        problem = cron_problem(self.schedule.strip())
        if problem is not None:
            raise BudgetError(f"{self.path}.schedule: {problem}")
        try:
            return window_is_active(self.schedule.strip(), timedelta(seconds=self.duration), now)
        except ValueError as err:  # e.g. a date that never comes ("0 0 31 2 *")
            raise BudgetError(f"{self.path}.schedule: {self.schedule!r} never fires ({err})") from None

    def limit(self, node_count: int, now: datetime) -> int:
        """Nodes this budget allows at ``now`` out of ``node_count`` (UNLIMITED when inactive)."""
        if not self.is_active(now):
            return UNLIMITED
        if not _NODES.match(self.nodes):
            raise BudgetError(f"{self.path}.nodes: {self.nodes!r} must be a count or a percentage like 10%")
        if self.nodes.endswith("%"):
            percent = int(self.nodes[:-1])
            return -(-percent * node_count // 100)  # rounded up, like PDB maxUnavailable
        return int(self.nodes)

    def describe(self) -> str:
        text = f"budget nodes={self.nodes}"
        if self.schedule is not None:
            text += f' schedule "{self.schedule}"'
            if self.duration is not None:
                text += f" for {format_duration_short(self.duration)}"
        if self.reasons is not None:
            text += f" reasons={','.join(sorted(self.reasons))}"
        return text


@dataclass(slots=True, frozen=True)
class BudgetAllowance:
    """What a pool's budgets leave for one reason right now, with the numbers behind it."""

    nodepool: str
    reason: str
    remaining: int  # nodes that may still start disrupting: max(0, limit - disrupting)
    limit: int  # min over active covering budgets, UNLIMITED when none applies
    node_count: int
    disrupting: int
    limited_by: str  # which budget set the limit (or why evaluation failed)

    def explain(self) -> str:
        """Human-readable reason a candidate of this pool is held back by its budget."""
        if self.limit == 0:
            return (
                f"disruption budget of NodePool {self.nodepool} allows 0 {self.reason} disruptions ({self.limited_by})"
            )
        return (
            f"disruption budget of NodePool {self.nodepool} exhausted for {self.reason}: "
            f"{self.disrupting} of {self.limit} allowed node(s) already disrupting ({self.limited_by})"
        )


def parse_budgets(raw: Sequence[Any] | None, *, path: str = "spec.disruption.budgets") -> list[Budget]:
    """Budgets of a NodePool (the CRD default ``[{nodes: 10%}]`` when unset)."""
    items = DEFAULT_BUDGETS if raw is None else raw
    return [Budget.from_manifest(item, path=f"{path}[{i}]") for i, item in enumerate(items)]


def allowance(
    nodepool: str,
    budgets: Sequence[Budget],
    reason: str,
    *,
    node_count: int,
    disrupting: int,
    now: datetime,
) -> BudgetAllowance:
    """How many more nodes of ``nodepool`` may be disrupted for ``reason`` at ``now``.

    Like Karpenter, any budget that cannot be evaluated makes the whole pool fail
    closed (limit 0), whichever reasons it names: we do not know what was meant.
    """
    limit = UNLIMITED
    limited_by = "no active budget limits it"
    for budget in budgets:
        try:
            value = budget.limit(node_count, now)
        except BudgetError as err:
            return BudgetAllowance(nodepool, reason, 0, 0, node_count, disrupting, f"invalid budget: {err}")
        if budget.covers(reason) and value < limit:
            limit = value
            limited_by = f"{budget.describe()} -> {value} of {node_count} node(s)"
    remaining = max(0, limit - disrupting) if limit != UNLIMITED else UNLIMITED
    return BudgetAllowance(nodepool, reason, remaining, limit, node_count, disrupting, limited_by)



# -- over time: when budgets change, and when a pool next has room (``plan`` paces its commands with these) ---


def boundaries(budgets: Sequence[Budget], now: datetime) -> list[datetime]:
    """When scheduled budgets next open, and when the windows open at ``now`` close (each after ``now``, or at
    it for a window opening right now); budgets that cannot be evaluated have none."""
    moments = []
    for budget in budgets:
        if budget.schedule is None or budget.duration is None:
            continue
        length = timedelta(seconds=budget.duration)
        try:
            opens = next_activation(budget.schedule.strip(), now)
            # The window open now (if any) started at the first activation after now - duration.
            current_start = next_activation(budget.schedule.strip(), now - length)
        except (ValueError, KeyError):
            continue
        moments.append(opens)
        if current_start <= now:
            moments.append(current_start + length)
    return moments


@dataclass(slots=True, frozen=True)
class InFlight:
    """A command of a pool under way from ``started`` until ``finished``: its ``nodes`` are there and disrupting
    until then; its ``replacements`` (already counted among the pool's nodes) only count once initialized, at
    ``ready``, as Karpenter counts initialized nodes only."""

    started: datetime
    ready: datetime
    finished: datetime
    nodes: int
    replacements: int = 0

    def disrupting(self, moment: datetime) -> int:
        return self.nodes if self.started <= moment < self.finished else 0

    def uncounted(self, moment: datetime) -> int:
        """Replacements that exist but are not initialized yet at ``moment``."""
        return self.replacements if moment < self.ready else 0


def earliest_room(
    nodepool: str,
    budgets: Sequence[Budget],
    reason: str,
    *,
    nodes: int,
    replacements: int,
    pool_nodes: int,
    in_flight: Sequence[InFlight],
    now: datetime,
    until: datetime,
) -> datetime | None:
    """The first moment from ``now`` to ``until`` at which the pool's budgets for ``reason`` have room for
    ``nodes`` more disrupting nodes; None when there is none by ``until``.

    ``pool_nodes`` are the pool's nodes as if every command so far, this one included, were done (the
    simulator carries commands out at once), replacements included. At a moment the pool really holds those,
    plus the nodes of this command and of the commands still in flight then (they exist until drained, and
    count as disrupting), minus the replacements not initialized yet (``replacements`` of this command,
    launched as it starts). Room only changes when an in-flight command finishes or a scheduled budget opens or
    closes, so only those moments are tried."""
    moments = {now, *(f.finished for f in in_flight if f.finished > now), *boundaries(budgets, now)}
    for moment in sorted(m for m in moments if now <= m <= until):
        disrupting = sum(f.disrupting(moment) for f in in_flight)
        counted = pool_nodes + nodes - replacements + disrupting - sum(f.uncounted(moment) for f in in_flight)
        left = allowance(nodepool, budgets, reason, node_count=max(0, counted), disrupting=disrupting, now=moment)
        if left.remaining == UNLIMITED or left.remaining >= nodes:
            return moment
    return None


def next_opening(budgets: Sequence[Budget], node_count: int, now: datetime, until: datetime) -> datetime | None:
    """The first budget boundary after ``now`` at which the pool allows some disruption again for some reason;
    None when none does by ``until`` (e.g. ``nodes: 0`` every day for 24h: waiting never helps)."""
    moment = now
    while moment <= until:
        later = [m for m in boundaries(budgets, moment) if m > moment]
        if not later:
            return None
        moment = min(later)
        if moment <= until and any(
            allowance("", budgets, reason, node_count=node_count, disrupting=0, now=moment).remaining > 0
            for reason in DISRUPTION_REASONS
        ):
            return moment
    return None
