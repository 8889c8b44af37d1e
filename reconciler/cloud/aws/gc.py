"""Orphan instance garbage collection: instances this cluster owns that no NodeClaim references.

A launch that succeeded just before a crash (or a NodeClaim deleted while its
launch was in flight) leaves an owned instance behind. ``orphans`` decides
(pure); ``collect_orphans`` lists by tag and terminates. Instances younger than
30 s are spared: their NodeClaim may not have recorded the providerID yet.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from reconciler.cloud.aws.instances import InstanceRecord, parse_provider_id
from reconciler.cloud.types import InstanceNotFoundError

MIN_AGE = timedelta(seconds=30)


def referenced_instance_ids(nodeclaims: Iterable[dict]) -> set[str]:
    """Instance IDs named by NodeClaims' ``status.providerID``."""
    ids = set()
    for nodeclaim in nodeclaims:
        value = (nodeclaim.get("status") or {}).get("providerID")
        if not value:
            continue
        try:
            ids.add(parse_provider_id(str(value))[1])
        except ValueError:
            continue
    return ids


def orphans(records: Iterable[InstanceRecord], referenced: set[str], now: datetime) -> list[InstanceRecord]:
    """Owned, live instances older than 30 s whose ID no NodeClaim carries."""
    result = []
    for record in records:
        if record.id in referenced or record.state in ("shutting-down", "terminated"):
            continue
        if record.launch_time is not None and now - record.launch_time < MIN_AGE:
            continue
        result.append(record)
    return sorted(result, key=lambda r: r.id)


async def collect_orphans(provider: object, nodeclaims: Iterable[dict], now: datetime) -> list[str]:
    """Terminate orphans through an ``AWSCloudProvider``; returns their provider IDs."""
    from reconciler.cloud.aws.provider import AWSCloudProvider

    assert isinstance(provider, AWSCloudProvider)
    records = await provider.list_records()
    collected = []
    for record in orphans(records, referenced_instance_ids(nodeclaims), now):
        try:
            await provider.delete(record.provider_id)
        except InstanceNotFoundError:
            continue
        provider.metrics.garbage_collected_instances.inc()
        collected.append(record.provider_id)
    return collected
