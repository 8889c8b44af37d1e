"""When each launch, disruption and eviction of a run happened, at its own simulated time.

``plan`` times each disruption command (``plan.timeline``: started, replacements ready, drained) and stamps the
evictions of its drain; ``simulate`` has only its steps' clocks. The charts of the HTML report and the plan's
JSON ``timeline`` both read these, so a chart's marks and the tables agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.model.meta import format_time, parse_time


@dataclass(slots=True, frozen=True)
class Happening:
    """A launch, disruption or eviction at its own simulated time (the time the tables show for it)."""

    at: datetime
    what: str  # launched | disrupted | evicted
    name: str  # the NodeClaim, the node, the pod
    step: int  # its step in the result document


def happenings(records: Sequence[Mapping[str, Any]]) -> list[Happening]:
    """Every launch (at its command's start, else its step's clock), disruption (at its command's start) and
    eviction (when its drain ran), in time order: plan times each command; simulate has its steps' clocks."""
    started = command_starts(records)
    found = []
    for index, record in enumerate(records):
        clock = moment(record["clock"])
        for item in record.get("launched") or []:
            found.append(Happening(started.get(item["nodeclaim"], clock), "launched", item["nodeclaim"], index))
        for item in record.get("disrupted") or []:
            at = moment(item["startedAt"]) if item.get("startedAt") else clock
            found.append(Happening(at, "disrupted", item["node"], index))
        for event in record.get("events") or []:
            if event.get("reason") == "Evicted":
                at = moment(event["at"]) if event.get("at") else clock
                found.append(Happening(at, "evicted", str(event.get("object", "")).partition("/")[2], index))
    return sorted(found, key=lambda h: (h.at, h.step))


def command_starts(records: Sequence[Mapping[str, Any]]) -> dict[str, datetime]:
    """A replacement is launched when its command starts (plan times commands; simulate has no such times)."""
    return {name: moment(item["startedAt"]) for record in records for item in record.get("disrupted") or []
            if item.get("startedAt") for name in item.get("replacements") or []}


def moment(stamp: str) -> datetime:
    """A result document's timestamp as an aware datetime (the documents only hold valid ones)."""
    found = parse_time(stamp)
    assert found is not None
    return found


def as_documents(found: Sequence[Happening]) -> list[dict[str, Any]]:
    """The plan JSON's ``timeline``: ``{at, what, name, step}`` per happening, in time order."""
    return [{"at": format_time(h.at), "what": h.what, "name": h.name, "step": h.step} for h in found]
