"""Carrying out one disruption command: the loop the live disruption controller and the simulator share.

For a validated method (emptiness, consolidation) wait the validation period and ``validate`` on a fresh
view; an invalid command is abandoned. Otherwise ``CommandExecutor.start`` (taint, create + launch the
replacements) and ``advance`` — at once, then every ``poll`` seconds — until every replacement is
initialized and the candidates are deleted, or the command aborts. Time comes from the caller: ``now``
and ``sleep`` are the live clock and ``asyncio.sleep``, or the simulator's virtual clock (its sleep moves
it on and lets the simulated kubelets and terminations run). What each side reports (Kubernetes events and
metrics live, the result document in simulation) goes through ``CommandReporter``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from reconciler.cloud.types import InstanceType
from reconciler.disruption.methods import method_named
from reconciler.disruption.types import Command
from reconciler.disruption.validation import validate
from reconciler.lifecycle.orchestration import CommandExecutor, InFlightCommand
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

FreshView = Callable[[], Awaitable[tuple[ClusterState, Mapping[str, Sequence[InstanceType]]]]]


class CommandReporter(Protocol):
    """The side's own bookkeeping around the shared steps."""

    async def abandoned(self, command: Command, reason: str) -> None:
        """Validation found the command no longer valid; nothing was changed."""

    def hold(self, command: Command) -> bool:
        """May the command start now (e.g. its replacement names are not being launched elsewhere)?"""

    def release(self, command: Command) -> None:
        """After ``start``, whatever ``hold`` took."""

    async def starting(self, command: Command) -> None:
        """Just before the candidates are tainted and the replacements launched."""

    async def started(self, command: Command, flight: InFlightCommand) -> None:
        """The candidates are tainted and the replacements launched (``flight.launched``); not aborted."""

    async def finished(self, command: Command, flight: InFlightCommand) -> None:
        """The command is over: candidates deleted (``deleting``) or ``aborted``."""


async def carry_out(
    command: Command,
    executor: CommandExecutor,
    reporter: CommandReporter,
    *,
    settings: Settings,
    now: Callable[[], datetime],
    sleep: Callable[[float], Awaitable[None]],
    fresh_view: FreshView,
    poll: float,
) -> InFlightCommand | None:
    """Carry out one command; None when it was abandoned at validation or could not be held."""
    if method_named(command.method).validated:
        await sleep(settings.consolidation_validation_wait)
        state, types = await fresh_view()
        checked = validate(command, state, types, settings, now())
        if not checked.valid or checked.command is None:
            await reporter.abandoned(command, checked.reason)
            return None
        command = checked.command
    if not reporter.hold(command):
        return None
    await reporter.starting(command)
    try:
        flight = await executor.start(command, now())
    finally:
        reporter.release(command)
    if flight.state != "aborted":
        await reporter.started(command, flight)
        flight = await executor.advance(flight, now())
    while flight.state == "waiting":
        await sleep(poll)
        flight = await executor.advance(flight, now())
    await reporter.finished(command, flight)
    return flight
