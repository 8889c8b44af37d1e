"""Helpers for object metadata shared by the domain types: timestamps, owners, keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


class ManifestError(ValueError):
    """A manifest field with a bad value; the message names the field path."""


def parse_time(value: Any, *, path: str = "timestamp") -> datetime | None:
    """RFC 3339 timestamp (as the API server writes it) to an aware UTC datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    text = str(value)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ManifestError(f"{path}: {value!r} is not an RFC 3339 timestamp") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
