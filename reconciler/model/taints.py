"""Taints and tolerations with Kubernetes' matching rules."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.model import labels as wk

NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"
EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)


class TaintError(ValueError):
    """An invalid taint or toleration; the message names the offending field."""


@dataclass(slots=True, frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    @classmethod
    def from_manifest(cls, raw: Mapping[str, Any], *, path: str = "taint") -> Taint:
        if not isinstance(raw, Mapping) or not raw.get("key"):
            raise TaintError(f"{path}.key: required")
        effect = raw.get("effect")
        if effect not in EFFECTS:
            raise TaintError(f"{path}.effect: {effect!r} is not one of {', '.join(EFFECTS)}")
        return cls(str(raw["key"]), str(effect), str(raw.get("value") or ""))

    def to_manifest(self) -> dict[str, str]:
        result = {"key": self.key, "effect": self.effect}
        if self.value:
            result["value"] = self.value
        return result

    def matches(self, other: Taint) -> bool:
        """Same key and effect (Kubernetes' MatchTaint; the value is not compared)."""
        return self.key == other.key and self.effect == other.effect

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(slots=True, frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    @classmethod
    def from_manifest(cls, raw: Mapping[str, Any], *, path: str = "toleration") -> Toleration:
        if not isinstance(raw, Mapping):
            raise TaintError(f"{path}: expected a map")
        operator = raw.get("operator") or "Equal"
        if operator not in ("Equal", "Exists", "Gt", "Lt"):
            raise TaintError(f"{path}.operator: {operator!r} is not one of Equal, Exists, Gt, Lt")
        effect = raw.get("effect") or ""
        if effect and effect not in EFFECTS:
            raise TaintError(f"{path}.effect: {effect!r} is not one of {', '.join(EFFECTS)}")
        seconds = raw.get("tolerationSeconds")
        return cls(
            str(raw.get("key") or ""),
            str(operator),
            str(raw.get("value") or ""),
            str(effect),
            int(seconds) if seconds is not None else None,
        )

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator == "Equal":
            return self.value == taint.value
        # Gt/Lt compare integers (Kubernetes 1.35+ toleration comparison operators).
        try:
            taint_value, wanted = int(taint.value), int(self.value)
        except ValueError:
            return False
        return taint_value > wanted if self.operator == "Gt" else taint_value < wanted


PREFER_NO_SCHEDULE_TOLERATION = Toleration(operator="Exists", effect=PREFER_NO_SCHEDULE)


def tolerates(taint: Taint, tolerations: Iterable[Toleration]) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def untolerated(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> list[Taint]:
    """The taints that no toleration matches (all effects count, PreferNoSchedule included)."""
    return [taint for taint in taints if not any(t.tolerates(taint) for t in tolerations)]


def is_ephemeral(taint: Taint) -> bool:
    """Taints a node carries while booting; scheduling ignores them on uninitialized managed nodes."""
    if taint.key.startswith(wk.EPHEMERAL_TAINT_PREFIX):
        return True
    if taint.key == "node.kubernetes.io/not-ready":
        return taint.effect in (NO_SCHEDULE, NO_EXECUTE)
    if taint.key == "node.kubernetes.io/unreachable":
        return taint.effect == NO_SCHEDULE
    if taint.key == "node.cloudprovider.kubernetes.io/uninitialized":
        return taint.effect == NO_SCHEDULE and taint.value == "true"
    if taint.key == wk.UNREGISTERED_TAINT_KEY:
        return taint.effect == NO_EXECUTE
    return False


def parse_taints(raw: Any, *, path: str) -> tuple[Taint, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise TaintError(f"{path}: expected a list")
    return tuple(Taint.from_manifest(item, path=f"{path}[{i}]") for i, item in enumerate(raw))


def parse_tolerations(raw: Any, *, path: str) -> tuple[Toleration, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise TaintError(f"{path}: expected a list")
    return tuple(Toleration.from_manifest(item, path=f"{path}[{i}]") for i, item in enumerate(raw))
