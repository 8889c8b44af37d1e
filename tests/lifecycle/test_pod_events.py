"""``PodEventStamper``: which pod changes stamp which node, and the 10 s dedupe window, as both the live
``PodEventsController`` and the simulator use it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.lifecycle.pod_events import PodEventStamper, PodPlacement

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def pod(name: str, node: str = "", *, phase: str = "Running", deleting: bool = False,
        daemon: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T09:00:00Z"
    if daemon:
        metadata["ownerReferences"] = [{"kind": "DaemonSet", "name": "agent", "controller": True}]
    return {"metadata": metadata, "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}


def claims(node: str) -> str | None:
    return f"claim-{node}"


def flush(stamper: PodEventStamper, now: datetime) -> list[tuple[str, datetime]]:
    written = []
    for stamp in stamper.due(now, claims):
        stamper.written(stamp)
        written.append((stamp.nodeclaim, stamp.at))
    return written


def test_binding_finishing_and_leaving_each_stamp_the_node() -> None:
    stamper = PodEventStamper(dedupe_seconds=10)
    assert stamper.observe(pod("web"), False, at(0)) == ""  # pending: no node yet
    assert stamper.observe(pod("web", "a"), False, at(0)) == "a"  # bound
    assert flush(stamper, at(0)) == [("claim-a", at(0))]
    assert stamper.observe(pod("web", "a", phase="Succeeded"), False, at(20)) == "a"  # finished
    assert flush(stamper, at(20)) == [("claim-a", at(20))]
    assert stamper.observe(pod("job", "b"), False, at(40)) == "b"
    assert stamper.observe(pod("job", "b", deleting=True), False, at(40)) == "b"  # terminating
    assert stamper.observe(pod("job", "b", deleting=True), True, at(40)) == "b"  # gone
    assert flush(stamper, at(40)) == [("claim-b", at(40))]  # one stamp for changes at one instant


def test_an_unchanged_pod_a_daemonset_pod_and_a_starting_object_stamp_nothing() -> None:
    stamper = PodEventStamper(dedupe_seconds=10)
    stamper.observe(pod("web", "a"), False, at(0), counts=False)  # already running when we started
    assert flush(stamper, at(0)) == []
    assert stamper.observe(pod("web", "a"), False, at(5)) == ""  # a status update: placement unchanged
    assert stamper.observe(pod("agent", "a", daemon=True), False, at(5)) == ""
    assert stamper.observe(pod("agent", "a", daemon=True), True, at(6)) == ""
    assert flush(stamper, at(30)) == []
    assert stamper.observe(pod("web", "a"), True, at(30)) == "a"  # but it was learnt: leaving counts
    assert flush(stamper, at(30)) == [("claim-a", at(30))]


def test_an_event_inside_the_window_is_stamped_when_it_ends_whenever_stamps_are_asked_for() -> None:
    prompt, late = PodEventStamper(dedupe_seconds=10), PodEventStamper(dedupe_seconds=10)
    events = {0: pod("x", "a"), 3: pod("y", "a"), 25: pod("z", "a")}
    written = []
    for seconds in (0, 3, 12, 25):  # live: a flush as each event arrives, and when the window ends
        if seconds in events:
            prompt.observe(events[seconds], False, at(seconds))
        written += flush(prompt, at(seconds))
        if seconds == 3:
            assert prompt.next_due() == at(10)  # the event at +3 s waits for the window
    assert written == [("claim-a", at(0)), ("claim-a", at(10)), ("claim-a", at(25))]
    # The simulator asks only between steps: the stamp it ends with is the live one.
    for seconds, manifest in events.items():
        late.observe(manifest, False, at(seconds))
    assert flush(late, at(30)) == [("claim-a", at(25))]
    late.observe(pod("x", "a"), True, at(31))
    late.observe(pod("y", "a"), True, at(33))
    assert flush(late, at(40)) == [("claim-a", at(35))]  # +31 s is within +25 s's window: due at +35 s


def test_a_node_without_a_live_claim_drops_its_stamp() -> None:
    stamper = PodEventStamper(dedupe_seconds=10)
    stamper.observe(pod("web", "unmanaged"), False, at(0))
    assert stamper.due(at(0), lambda node: None) == []
    assert stamper.next_due() is None


def test_placement_reads_node_phase_and_deletion() -> None:
    assert PodPlacement.of(pod("p", "a", phase="Failed", deleting=True)) == PodPlacement("a", True, True)
    assert PodPlacement.of({}) == PodPlacement("", False, False)
