"""Carrying out a disruption command: taint, launch replacements, wait, delete — or abort and untaint.

Shared by the live disruption controller and the simulator. The command itself
is a pure decision from ``reconciler.disruption``; this module only performs it
through ``KubeAPI``/``CloudProvider``. ``start`` is called once; ``advance`` is
called until it reports the command finished or aborted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from reconciler.cloud.types import CloudProvider
from reconciler.kube.api import NODECLAIM, ApiError, KubeAPI, Manifest, NotFoundError
from reconciler.kube.edits import drop_condition, edit_taints
from reconciler.lifecycle.conditions import set_condition
from reconciler.lifecycle.launch import launch
from reconciler.lifecycle.termination import DISRUPTED_TAINT
from reconciler.model import labels as wk
from reconciler.model.conditions import condition, is_true

# Karpenter: clamp(80 ms x queued commands, 10 min, 1 h); one command at a time here.
REPLACEMENT_TIMEOUT = timedelta(minutes=10)


@dataclass(slots=True)
class InFlightCommand:
    reason: str
    candidates: list[tuple[str, str]]  # (node name, nodeclaim name)
    replacements: list[str]
    started: datetime
    launched: list[str] = field(default_factory=list)
    stored: dict[str, Any] = field(default_factory=dict)  # launched replacement -> the claim as last written
    state: str = "waiting"  # waiting | deleting | done | aborted
    message: str = ""


class CommandExecutor:
    """``nodeclaims`` / ``nodes`` find a NodeClaim / Node by name (the live controller's informer cache; ``None``:
    not there yet, or gone): writes go against those copies (resourceVersion-guarded) and reads come from them;
    without them objects are read from the API server. ``idempotent_launches``: see ``launch``."""

    def __init__(self, kube: KubeAPI, cloud: CloudProvider, *,
                 nodeclaims: Callable[[str], Manifest | None] | None = None,
                 nodes: Callable[[str], Manifest | None] | None = None,
                 idempotent_launches: bool = False) -> None:
        self._kube = kube
        self._cloud = cloud
        self._nodeclaims = nodeclaims
        self._nodes = nodes
        self._idempotent = idempotent_launches

    async def _claim(self, name: str) -> Manifest:
        """The cached copy when there is one; the API server's when the cache has not seen the claim."""
        found = self._nodeclaims(name) if self._nodeclaims is not None else None
        return found if found is not None else await self._kube.get(NODECLAIM, name)

    async def start(self, command: Any, now: datetime) -> InFlightCommand:
        """Taint the candidates and create + launch the replacement NodeClaims."""
        flight = InFlightCommand(
            reason=command.reason,
            candidates=[(c.name, c.nodeclaim) for c in command.candidates],
            replacements=[r.name for r in command.replacements],
            started=now,
        )
        try:
            for node_name, claim_name in flight.candidates:
                await self._taint(node_name, add=True)
                if claim_name:
                    try:
                        await set_condition(
                            self._kube, claim_name,
                            condition("DisruptionReason", True, now, reason=command.reason,
                                      message=f"disrupted by {command.method}"),
                            current=self._cached(self._nodeclaims, claim_name),
                        )
                    except NotFoundError:
                        continue
        except ApiError as err:  # e.g. a conflict that outlasted the retries: undo; the next pass decides anew
            await self.abort(flight, f"could not mark the candidates: {err.message}")
            return flight
        for replacement in command.replacements:
            created = await self._kube.create(replacement.manifest)
            outcome = await launch(self._kube, self._cloud, created, now, idempotent=self._idempotent)
            if outcome.stored is not None:
                flight.stored[replacement.name] = outcome.stored
            if outcome.instance is None:
                await self.abort(flight, f"replacement {replacement.name} could not launch: {outcome.error}")
                return flight
            flight.launched.append(replacement.name)
        return flight

    async def advance(self, flight: InFlightCommand, now: datetime) -> InFlightCommand:
        """Delete the candidates once every replacement is initialized; abort on a vanished one or timeout."""
        if flight.state != "waiting":
            return flight
        for name in flight.replacements:
            try:
                claim = await self._claim(name)
            except NotFoundError:
                await self.abort(flight, f"replacement {name} disappeared before it initialized")
                return flight
            if not is_true(claim, "Initialized"):
                if now - flight.started > REPLACEMENT_TIMEOUT:
                    await self.abort(flight, f"replacement {name} did not initialize within {REPLACEMENT_TIMEOUT}")
                return flight
        for _, claim_name in flight.candidates:
            if claim_name:
                try:
                    await self._kube.delete(NODECLAIM, claim_name)
                except NotFoundError:
                    continue
        flight.state = "deleting"
        return flight

    async def abort(self, flight: InFlightCommand, message: str) -> None:
        """Undo: untaint candidates, clear their DisruptionReason, remove replacements that were made.

        Best effort: what an API error leaves behind (a taint, the condition) the disruption loop's stale-taint
        pass removes later."""
        flight.state = "aborted"
        flight.message = message
        for node_name, claim_name in flight.candidates:
            with contextlib.suppress(ApiError):
                await self._taint(node_name, add=False)
            if claim_name:
                with contextlib.suppress(ApiError):
                    await drop_condition(self._kube, claim_name, "DisruptionReason",
                                         current=self._cached(self._nodeclaims, claim_name))
        for name in flight.launched:
            try:
                await self._kube.delete(NODECLAIM, name)
            except NotFoundError:
                continue

    async def _taint(self, node_name: str, *, add: bool) -> None:
        def edit(taints: list[dict[str, Any]]) -> list[dict[str, Any]]:
            kept = [t for t in taints if t.get("key") != wk.DISRUPTED_TAINT_KEY]
            return [*kept, dict(DISRUPTED_TAINT)] if add else kept

        with contextlib.suppress(NotFoundError):
            await edit_taints(self._kube, node_name, edit, current=self._cached(self._nodes, node_name))

    @staticmethod
    def _cached(lookup: Callable[[str], Manifest | None] | None, name: str) -> Manifest | None:
        return lookup(name) if lookup is not None else None
