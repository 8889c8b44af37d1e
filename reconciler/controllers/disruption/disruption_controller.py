"""The disruption loop: every poll period, ask the pure engine for one command and carry it out.

One pass: clear disrupted taints a previous (crashed) leader left on nodes that
no command owns; ``decide`` on a private snapshot (in a worker thread, bounded
by ``decision_timeout``); for a validated method (emptiness, consolidation) wait the
validation period and ``validate`` on a fresh snapshot; then ``CommandExecutor.start``
(taint, create + launch replacements) and ``advance`` until every replacement is
initialized and the candidates are deleted, or the command aborts — the loop the
simulator runs too (``lifecycle.disruption_run.carry_out``), with this controller
reporting events and metrics. Commands run one at a time; the termination
controller drains the deleted candidates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from reconciler.cloud.types import InstanceType
from reconciler.controllers.provisioning.provisioning_controller import min_values_relaxed
from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, NameGenerator, ref, snake_case
from reconciler.disruption.decide import decide
from reconciler.disruption.methods import method_named
from reconciler.disruption.types import Command, DisruptionDecision
from reconciler.kube.api import ApiError, NotFoundError
from reconciler.kube.edits import drop_condition, edit_taints
from reconciler.lifecycle.disruption_run import carry_out
from reconciler.lifecycle.nodepool_types import instance_types_by_nodepool
from reconciler.lifecycle.orchestration import CommandExecutor, InFlightCommand
from reconciler.model import labels as wk
from reconciler.state.cluster import ClusterState
from reconciler.state.store import StateStore

log = ControllerLog("disruption")
# Not a reason the node stays: the pass simply did not get to it (NotEvaluated), or the node is being disrupted
# (Deleting: chosen by a command, or its NodeClaim deleted): never reported as blocked.
_UNEXPLAINED = frozenset({"NotEvaluated", "Deleting"})
# Codes whose message carries a countdown or deadline: deduplicated by code, or every pass would emit anew.
_TICKING_CODES = frozenset({"ConsolidateAfter", "Nominated"})


class DisruptionController:
    def __init__(self, ctx: ControllerContext, store: StateStore, names: NameGenerator,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.ctx = ctx
        self.sleep = sleep  # injected with the clock: a test on a manual clock moves it on
        self.store = store
        self.names = names
        self.executor = CommandExecutor(ctx.kube, ctx.cloud, idempotent_launches=True,
                                        nodeclaims=lambda name: store.get("NodeClaim", name),
                                        nodes=lambda name: store.get("Node", name))
        self.commands: list[InFlightCommand] = []  # finished commands, newest last (for tests and status)
        self._unseen_pools: list[str] = []
        # Replacement -> the claims it replaces: a replacement stays nominated (never "empty, so remove it")
        # until the nodes it replaces are gone and their pods had the chance to move onto it.
        self._replacing: dict[str, set[str]] = {}

    async def run(self) -> None:
        while True:
            async with self.ctx.reconciling():
                await self.reconcile_once()
            await self.sleep(self.ctx.settings.disruption_poll_period)

    async def reconcile_once(self) -> InFlightCommand | None:
        if not self.store.synced or self._unlaunched():
            return None
        self.store.unmark_for_deletion(self._marked_names())
        self._protect_replacements()
        await self.clear_stale_taints()
        decision = await self._decide()
        if decision is None:
            return None
        await self._explain(decision)
        if decision.command is None:
            return None
        return await self.execute(decision.command)

    async def _decide(self) -> DisruptionDecision | None:
        state = self.store.snapshot()
        if not state.managed_nodes():
            return None
        types = await instance_types_by_nodepool(self.ctx.cloud, state, self.ctx.settings)
        deadline = self.ctx.clock.monotonic() + self.ctx.timings.decision_timeout
        clock = self.ctx.clock
        started = clock.monotonic()
        decision = await asyncio.to_thread(
            decide, state, types, self.ctx.settings, self.ctx.now(),
            name_for=self.names, should_stop=lambda: clock.monotonic() > deadline, first_pools=self._unseen_pools,
            timer=clock.monotonic,
        )
        self.ctx.metrics.scheduling_duration.labels(controller="disruption").observe(clock.monotonic() - started)
        self._unseen_pools = list(decision.unseen_pools)
        self._export(decision)
        return decision

    def _export(self, decision: DisruptionDecision) -> None:
        """What the pass looked at, as Karpenter's disruption metrics report it."""
        metrics = self.ctx.metrics
        for run in decision.methods:
            reason = run.reason.lower()
            metrics.disruption_eligible_nodes.labels(reason=reason).set(run.eligible)
            if run.seconds is not None:
                metrics.disruption_evaluation_duration.labels(
                    reason=reason, consolidation_type=run.consolidation_type).observe(run.seconds)
            if run.timed_out and run.consolidation_type in ("multi", "single"):
                metrics.consolidation_timeouts.labels(consolidation_type=run.consolidation_type).inc()
        for allowance in decision.budgets:
            labels = {"nodepool": allowance.nodepool, "reason": allowance.reason}
            metrics.nodepool_allowed_disruptions.labels(**labels).set(allowance.limit)
            metrics.nodepool_nodes_consuming_budgets.labels(**labels).set(allowance.disrupting)
        for move in decision.moves:
            labels = {"nodepool": move.nodepool, "policy": move.policy}
            metrics.consolidation_moves.labels(decision=move.decision, **labels).inc()
            if move.score is not None:
                metrics.consolidation_score.labels(decision=move.score_decision, **labels).observe(move.score)

    async def execute(self, command: Command) -> InFlightCommand | None:
        """The shared loop (``lifecycle.disruption_run``) on the live clock; this controller reports."""
        return await carry_out(command, self.executor, self, settings=self.ctx.settings, now=self.ctx.now,
                               sleep=self.sleep, fresh_view=self._fresh_view, poll=self.ctx.timings.command_poll)

    async def _fresh_view(self) -> tuple[ClusterState, Mapping[str, Sequence[InstanceType]]]:
        state = self.store.snapshot()
        return state, await instance_types_by_nodepool(self.ctx.cloud, state, self.ctx.settings)

    # -- CommandReporter ------------------------------------------------------------------------
    async def abandoned(self, command: Command, reason: str) -> None:
        self.ctx.metrics.disruption_failed_validations.labels(
            consolidation_type=method_named(command.method).consolidation_type).inc(len(command.candidates))
        log.info("abandoning disruption command", command=command.describe(), reason=reason)
        message = f"disruption command abandoned after validation: {reason}"
        for candidate in command.candidates:
            for involved in self._objects_of(candidate.name, candidate.nodeclaim):
                await self.ctx.event(involved, "Normal", "DisruptionBlocked", message,
                                     dedupe=self.ctx.timings.event_dedupe)

    def hold(self, command: Command) -> bool:
        return self.ctx.locks.try_hold([r.name for r in command.replacements])

    def release(self, command: Command) -> None:
        self.ctx.locks.release([r.name for r in command.replacements])

    async def starting(self, command: Command) -> None:
        self._announce(command)
        await self._record(command)

    async def started(self, command: Command, flight: InFlightCommand) -> None:
        self.store.mark_for_deletion(c.name for c in command.candidates)
        until = flight.started + self.ctx.timings.nomination_window(self.ctx.settings)
        for name in flight.launched:
            self.store.nominate(name, until)
            self._log_launch(name, flight.stored.get(name))
            await self.ctx.event(self.store.get("NodeClaim", name), "Normal", "DisruptionLaunching",
                                 f"Launching NodeClaim: {command.reason}")

    async def finished(self, command: Command, flight: InFlightCommand) -> None:
        self.store.unmark_for_deletion(c.name for c in command.candidates)
        self._record_outcome(command, flight)
        if flight.state == "deleting":
            for name in flight.launched:
                self._replacing[name] = {c.nodeclaim for c in command.candidates if c.nodeclaim}
            self._protect_replacements()
        if flight.state == "aborted":
            log.info("disruption command aborted", command=command.describe(), reason=flight.message)
            for candidate in command.candidates:
                await self.ctx.event(self.store.get("Node", candidate.name), "Warning", "DisruptionAborted",
                                     flight.message)
        self.commands.append(flight)

    def _log_launch(self, name: str, claim: dict[str, Any] | None) -> None:
        """Replacements are launched by the command itself: same log line as the lifecycle's launches (from the
        claim as the launch wrote it, which also goes into the cache at once)."""
        if claim is None:
            return
        self.store.write_through(claim)
        labels = claim["metadata"].get("labels") or {}
        status = claim.get("status") or {}
        log.info("launched nodeclaim", NodeClaim=ref(name), allocatable=status.get("allocatable") or {}, **{
            "provider-id": status.get("providerID", ""),
            "instance-type": labels.get(wk.INSTANCE_TYPE, ""),
            "zone": labels.get(wk.ZONE, ""),
            "capacity-type": labels.get(wk.CAPACITY_TYPE, ""),
        })

    def _announce(self, command: Command) -> None:
        pods = sum(len(c.reschedulable) for c in command.candidates)
        nodes = ", ".join(f"{c.name}/{c.instance_type_name}/{c.capacity_type}" for c in command.candidates)
        log.info(
            f"disrupting nodeclaim(s) via {command.action}, terminating {len(command.candidates)} nodes "
            f"({pods} pods) {nodes}" + (f" and replacing with {len(command.replacements)} node(s)"
                                        if command.replacements else "") + f"; for {command.reason}",
            reason=command.reason,
            method=command.method,
            decision=command.action,
            savings=command.savings_per_hour,
            **{
                "disrupted-node-count": len(command.candidates),
                "replacement-node-count": len(command.replacements),
                "pod-count": pods,
            },
        )

    async def _record(self, command: Command) -> None:
        metrics = self.ctx.metrics
        labels = {"decision": command.action, "reason": command.reason.lower(),
                  "consolidation_type": method_named(command.method).consolidation_type}
        metrics.disruption_decisions.labels(**labels).inc()
        for pool in dict.fromkeys(c.pool for c in command.candidates):
            metrics.disruption_decisions_by_nodepool.labels(nodepool=pool, **labels).inc()
        for candidate in command.candidates:
            why = f"{command.reason}/{command.action}"
            await self.ctx.event(self.store.get("Node", candidate.name), "Normal", "DisruptionTerminating",
                                 f"Disrupting Node: {why}")
            if candidate.nodeclaim:
                await self.ctx.event(self.store.get("NodeClaim", candidate.nodeclaim), "Normal",
                                     "DisruptionTerminating", f"Disrupting NodeClaim: {why}")
        for replacement in command.replacements:
            metrics.nodeclaims_created.labels(reason=command.reason.lower(), nodepool=replacement.nodepool,
                                              min_values_relaxed=min_values_relaxed(replacement.manifest)).inc()

    def _record_outcome(self, command: Command, flight: InFlightCommand) -> None:
        """Candidates deleted count as disrupted (Karpenter counts them when it deletes them); a command that
        gave up counts its replacements as queue failures."""
        metrics = self.ctx.metrics
        if flight.state == "deleting":
            for candidate in command.candidates:
                metrics.nodeclaims_disrupted.labels(reason=snake_case(command.reason), nodepool=candidate.pool,
                                                    capacity_type=candidate.capacity_type).inc()
        elif flight.state == "aborted" and command.replacements:
            # Karpenter labels consolidation_type with the decision here too.
            metrics.disruption_queue_failures.labels(
                decision=command.action, reason=snake_case(command.reason), consolidation_type=command.action,
            ).inc(len(command.replacements))

    async def _explain(self, decision: DisruptionDecision) -> None:
        """Why each node is left alone, as DisruptionBlocked on its NodeClaim and Node (``<Code>: <message>``,
        the simulator's form), once per period unless the reason changes."""
        for explanation in decision.explanations:
            if explanation.code in _UNEXPLAINED:
                continue
            timings = self.ctx.timings
            period = timings.unconsolidatable_event_dedupe if explanation.code == "NoAction" else timings.event_dedupe
            key = explanation.code if explanation.code in _TICKING_CODES else None
            for involved in self._objects_of(explanation.node, explanation.nodeclaim):
                await self.ctx.event(involved, "Normal", "DisruptionBlocked",
                                     f"{explanation.code}: {explanation.message}", dedupe=period, dedupe_key=key)

    def _objects_of(self, node: str, nodeclaim: str) -> list[dict[str, Any]]:
        """The NodeClaim and the Node a candidate is known by (those that exist)."""
        found = [self.store.get("NodeClaim", nodeclaim) if nodeclaim else None, self.store.get("Node", node)]
        return [obj for obj in found if obj is not None]

    async def clear_stale_taints(self) -> list[str]:
        """Untaint nodes a previous command left tainted (e.g. the leader died mid-command)."""
        cleared = []
        for node in self.store.nodes():
            metadata = node["metadata"]
            taints = (node.get("spec") or {}).get("taints") or []
            if metadata.get("deletionTimestamp") or not any(t.get("key") == wk.DISRUPTED_TAINT_KEY for t in taints):
                continue
            claim = self.store.nodeclaim_for_node(node)
            if claim is not None and claim["metadata"].get("deletionTimestamp"):
                continue  # being terminated: the taint is the terminator's
            try:
                await edit_taints(self.ctx.kube, metadata["name"],
                                  lambda taints: [t for t in taints if t.get("key") != wk.DISRUPTED_TAINT_KEY],
                                  current=node)
                if claim is not None:
                    await self._clear_reason(claim)
            except NotFoundError:
                continue
            except ApiError as err:  # e.g. still conflicting after the retries: the next pass tries again
                log.warning("removing stale disrupted taint failed", Node=ref(metadata["name"]), error=str(err))
                continue
            log.info("removed stale disrupted taint", Node=ref(metadata["name"]))
            cleared.append(metadata["name"])
        return cleared

    async def _clear_reason(self, claim: dict[str, Any]) -> None:
        claim_name = claim["metadata"]["name"]
        try:
            await drop_condition(self.ctx.kube, claim_name, "DisruptionReason", current=claim)
        except NotFoundError:
            return  # the claim is gone: nothing to clear
        except ApiError as err:
            log.warning("clearing DisruptionReason failed", NodeClaim=ref(claim_name), error=str(err))

    def _protect_replacements(self) -> None:
        until = self.ctx.now() + self.ctx.timings.nomination_window(self.ctx.settings)
        for replacement, replaced in list(self._replacing.items()):
            if not any(self.store.get("NodeClaim", name) is not None for name in replaced):
                del self._replacing[replacement]
                continue
            self.store.nominate(replacement, until)

    def _marked_names(self) -> list[str]:
        return [n.name for n in self.store.state.state_nodes() if n.marked_for_deletion_flag]

    def _unlaunched(self) -> bool:
        return any(
            not (c.get("status") or {}).get("providerID") and not c["metadata"].get("deletionTimestamp")
            for c in self.store.nodeclaims()
        )

