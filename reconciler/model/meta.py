"""Helpers for object metadata shared by the domain types: timestamps, owners, keys."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


class ManifestError(ValueError):
    """A manifest field with a bad value; the message names the field path."""


# RFC 3339 date-time as Kubernetes (Go's time.RFC3339 / RFC3339Nano) writes and accepts it: an explicit offset
# is required; Python's fromisoformat alone would also take dates, week dates and naive times.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")


def parse_time(value: Any, *, path: str = "timestamp") -> datetime | None:
    """RFC 3339 timestamp (as the API server writes it) to an aware UTC datetime; absent is ``None``.

    Raises ``ManifestError`` naming ``path`` when the value is present but not RFC 3339.
    A ``datetime`` passes through (naive ones are taken as UTC).
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    text = str(value)
    if not _RFC3339.fullmatch(text):
        raise ManifestError(f"{path}: {value!r} is not an RFC 3339 timestamp (e.g. 2024-01-31T09:30:00Z)")
    try:
        # Well-formed but impossible (month 13) is a ValueError; a valid local time whose UTC instant falls
        # outside years 1..9999 (9999-12-31T23:00:00-05:00) overflows on conversion.
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        raise ManifestError(f"{path}: {value!r} is not an RFC 3339 timestamp (e.g. 2024-01-31T09:30:00Z)") from None
    except OverflowError:
        raise ManifestError(f"{path}: {value!r} is out of range (UTC years 1 to 9999)") from None


def parse_time_or_none(value: Any) -> datetime | None:
    """Like :func:`parse_time`, for callers that treat an unreadable timestamp as absent (fail safe, no error)."""
    try:
        return parse_time(value)
    except ManifestError:
        return None


def format_time(value: datetime) -> str:
    """RFC 3339 at second precision. The year is always four digits (strftime's %Y drops the zeros of
    years before 1000 on glibc, which no RFC 3339 parser takes back)."""
    moment = value.astimezone(UTC)
    return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}Z"


@dataclass(slots=True, frozen=True)
class OwnerRef:
    kind: str
    name: str
    uid: str = ""
    api_version: str = ""
    controller: bool = False


def controller_owner(metadata: Mapping[str, Any]) -> OwnerRef | None:
    """The controlling owner reference (or the first owner when none is marked controller)."""
    owners = metadata.get("ownerReferences") or []
    chosen = None
    for owner in owners:
        if not isinstance(owner, Mapping):
            continue
        ref = OwnerRef(
            str(owner.get("kind", "")),
            str(owner.get("name", "")),
            str(owner.get("uid", "")),
            str(owner.get("apiVersion", "")),
            bool(owner.get("controller")),
        )
        if ref.controller:
            return ref
        chosen = chosen or ref
    return chosen


# Karpenter's ``IsOwnedByDaemonSet``: any ownerReference (controller or not) to an apps/v1 DaemonSet. An
# ownerReference without apiVersion (hand-written scenario files) counts too; a DaemonSet kind of another API
# group (OpenKruise's Advanced DaemonSet) does not, as upstream.
DAEMONSET_API_VERSIONS = frozenset({"apps/v1", ""})


def owned_by_daemonset(metadata: Mapping[str, Any] | None) -> bool:
    """Is the pod with this ``metadata`` a DaemonSet's pod: the one rule every consumer uses."""
    for owner in (metadata or {}).get("ownerReferences") or ():
        if (isinstance(owner, Mapping) and owner.get("kind") == "DaemonSet"
                and str(owner.get("apiVersion") or "") in DAEMONSET_API_VERSIONS):
            return True
    return False


def object_key(manifest: Mapping[str, Any]) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
    metadata = manifest.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = str(metadata.get("name", ""))
    return f"{namespace}/{name}" if namespace else name


def str_map(raw: Any, *, path: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ManifestError(f"{path}: expected a map of strings")
    return {str(k): "" if v is None else str(v) for k, v in raw.items()}
