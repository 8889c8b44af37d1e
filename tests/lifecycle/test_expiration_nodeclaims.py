from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.lifecycle.expiration import Expiration, expiration_time, expired, next_expiration

NOW = datetime(2026, 2, 1, 0, 0, tzinfo=UTC)


def claim(name: str, created: datetime, expire_after: str | None = "720h", **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if expire_after is not None:
        spec["expireAfter"] = expire_after
    metadata: dict[str, Any] = {
        "name": name,
        "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "labels": {"karpenter.sh/nodepool": "default"},
    }
    metadata.update(extra)
    return {"metadata": metadata, "spec": spec, "status": {"nodeName": f"node-{name}"}}


def test_expired_at_creation_plus_expire_after() -> None:
    claims = [
        claim("old", NOW - timedelta(hours=721)),
        claim("exact", NOW - timedelta(hours=720)),
        claim("young", NOW - timedelta(hours=719)),
        claim("short", NOW - timedelta(minutes=2), expire_after="1m"),
    ]
    assert expired(claims, NOW) == [  # oldest expiry first
        Expiration("old", "default", "node-old", NOW - timedelta(hours=1)),
        Expiration("short", "default", "node-short", NOW - timedelta(minutes=1)),
        Expiration("exact", "default", "node-exact", NOW),
    ]


def test_never_deleting_and_defaults() -> None:
    never = claim("never", NOW - timedelta(days=400), expire_after="Never")
    deleting = claim("deleting", NOW - timedelta(days=400), deletionTimestamp="2026-01-31T00:00:00Z")
    defaulted = claim("defaulted", NOW - timedelta(days=31), expire_after=None)  # CRD default 720h
    assert expiration_time(never) is None
    assert [e.nodeclaim for e in expired([never, deleting, defaulted], NOW)] == ["defaulted"]


def test_next_expiration_for_requeue() -> None:
    claims = [claim("a", NOW - timedelta(hours=700)), claim("b", NOW - timedelta(hours=710)), claim("c", NOW)]
    assert next_expiration(claims, NOW) == NOW + timedelta(hours=10)
    assert next_expiration([claim("x", NOW, expire_after="Never")], NOW) is None
