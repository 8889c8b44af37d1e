"""The event recorder's deduplication: at most once per period per (object, reason, message), bounded memory."""

from __future__ import annotations

from datetime import datetime, timedelta

from ctrl_cluster import utc

from reconciler.kube.api import EVENT
from reconciler.kube.memory import MemoryKube
from reconciler.observability import EventRecorder

CLAIM = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "default-abcde", "uid": "c-1"}}


class Clock:
    def __init__(self) -> None:
        self.now = utc()

    def __call__(self) -> datetime:
        return self.now


def written(kube: MemoryKube) -> list[tuple[str, int]]:
    return sorted((e["message"], e["count"]) for e in kube.objects(EVENT))


async def test_a_repeat_within_the_period_is_not_written_and_a_new_message_is() -> None:
    kube, clock = MemoryKube(), Clock()
    recorder = EventRecorder(kube, clock=clock)
    await recorder.record(CLAIM, "Normal", "DisruptionBlocked", "PDB: blocked", dedupe=120)
    clock.now += timedelta(seconds=60)
    await recorder.record(CLAIM, "Normal", "DisruptionBlocked", "PDB: blocked", dedupe=120)
    await recorder.record(CLAIM, "Normal", "DisruptionBlocked", "DoNotDisrupt: pod annotated", dedupe=120)
    assert written(kube) == [("DoNotDisrupt: pod annotated", 1), ("PDB: blocked", 1)]
    assert recorder.deduplicated == 1
    clock.now += timedelta(seconds=61)  # 121 s after it went out: due again (aggregated into the same Event)
    await recorder.record(CLAIM, "Normal", "DisruptionBlocked", "PDB: blocked", dedupe=120)
    assert written(kube) == [("DoNotDisrupt: pod annotated", 1), ("PDB: blocked", 2)]


async def test_a_dedupe_key_stands_in_for_a_ticking_message() -> None:
    kube, clock = MemoryKube(), Clock()
    recorder = EventRecorder(kube, clock=clock)
    for left in (50, 40, 30):
        await recorder.record(CLAIM, "Normal", "DisruptionBlocked", f"ConsolidateAfter: {left}s left",
                              dedupe=120, dedupe_key="ConsolidateAfter")
        clock.now += timedelta(seconds=10)
    assert written(kube) == [("ConsolidateAfter: 50s left", 1)]


async def test_an_event_the_rate_limit_refused_is_not_remembered_as_sent() -> None:
    kube, clock = MemoryKube(), Clock()
    recorder = EventRecorder(kube, clock=clock, burst=1, refill_every=60)
    await recorder.record(CLAIM, "Normal", "DisruptionBlocked", "first", dedupe=600)
    await recorder.record(CLAIM, "Normal", "DisruptionBlocked", "second", dedupe=600)  # no token left
    assert recorder.dropped == 1
    clock.now += timedelta(seconds=60)
    await recorder.record(CLAIM, "Normal", "DisruptionBlocked", "second", dedupe=600)
    assert written(kube) == [("first", 1), ("second", 1)]


async def test_memory_is_bounded_least_recently_used_first() -> None:
    kube, clock = MemoryKube(), Clock()
    recorder = EventRecorder(kube, clock=clock, max_entries=2)
    for message in ("a", "b", "c"):
        await recorder.record(CLAIM, "Normal", "DisruptionBlocked", message, dedupe=600)
    await recorder.record(CLAIM, "Normal", "DisruptionBlocked", "c", dedupe=600)  # remembered: suppressed
    await recorder.record(CLAIM, "Normal", "DisruptionBlocked", "a", dedupe=600)  # forgotten: written again
    assert recorder.deduplicated == 1
    assert written(kube) == [("a", 1), ("a", 1), ("b", 1), ("c", 1)]
