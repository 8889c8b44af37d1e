"""Capacity reservations through the AWS provider on moto (patched: moto has no reservations).

EC2NodeClass ``capacityReservationSelectorTerms`` -> DescribeCapacityReservations -> ``status`` and reserved
offerings (on-demand / 10^7, instances left); a reserved launch targets the reservation from its launch
template and comes back ``reserved`` with the reservation labels; a full reservation is learned; capacity
blocks launch as ``capacity-block``; a reservation no longer selected drifts; terminating gives the place back.
Every call is authorized against the stack's generated controller policies (the ``provider`` fixture).
"""

from __future__ import annotations

import base64
import copy
from datetime import UTC, datetime, timedelta

import pytest
from aws_harness import Recorder, make_provider

from reconciler.cloud.aws.capacityreservation import CAPACITY_RESERVATION_DRIFT, CapacityReservation
from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.provider import AWSCloudProvider
from reconciler.cloud.types import InsufficientCapacityError, LaunchRequest
from reconciler.model import labels as wk

ODCR = "cr-0aaaabbbbcccc0001"
BLOCK = "cr-0aaaabbbbcccc0002"


def odcr(aws: OfflineAWS, count: int = 2, **changes: object) -> CapacityReservation:
    fields: dict = dict(id=ODCR, instance_type="m5.large", zone="us-east-1b", owner_id=aws.account_id,
                        instance_match_criteria="targeted", available=count, total=count, tags={"team": aws.cluster})
    fields.update(changes)
    reservation = CapacityReservation(**fields)
    aws.add_capacity_reservation(reservation)
    return reservation


def selecting(aws: OfflineAWS, *terms: dict) -> dict:
    return aws.nodeclass(capacityReservationSelectorTerms=list(terms or [{"tags": {"team": aws.cluster}}]))


def request(name: str = "nc-r", *capacity_types: str,
            types: tuple[str, ...] = ("m5.large", "c5.large")) -> LaunchRequest:
    return LaunchRequest(nodeclaim=name, nodepool="default", nodeclass="default", instance_types=list(types),
                         capacity_types=list(capacity_types) or ["reserved", "spot", "on-demand"])


async def test_selector_terms_resolve_into_the_nodeclass_status(aws: OfflineAWS, provider: AWSCloudProvider) -> None:
    odcr(aws)
    odcr(aws, id="cr-0ffff000000000009", tags={"team": aws.cluster, "other": "yes"})
    other = "cr-0ffff000000000009"
    cases = [
        ([{"tags": {"team": aws.cluster}}], [ODCR, other]),
        ([{"tags": {"other": "*"}}], [other]),
        ([{"id": ODCR}], [ODCR]),
        ([{"instanceMatchCriteria": "targeted", "ownerID": aws.account_id, "tags": {"team": aws.cluster}}],
         [ODCR, other]),
        ([{"instanceMatchCriteria": "targeted", "ownerID": "999999999999", "tags": {"team": aws.cluster}}], []),
        ([{"instanceMatchCriteria": "open"}], []),
        ([{"id": "cr-0000000000000dead"}], []),  # gone: selects nothing
    ]
    for terms, expected in cases:
        provider._nodeclass_cache.clear()
        status = await provider.nodeclass_status(selecting(aws, *terms))
        assert sorted(r["id"] for r in status.get("capacityReservations") or []) == expected, terms
    [entry] = (await provider.nodeclass_status(selecting(aws, {"id": ODCR})))["capacityReservations"]
    assert entry == {"availabilityZone": "us-east-1b", "id": ODCR, "instanceMatchCriteria": "targeted",
                     "instanceType": "m5.large", "ownerID": aws.account_id, "reservationType": "default",
                     "interruptible": False, "state": "active"}
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["CapacityReservationsReady"] == "True" and conditions["Ready"] == "True"


async def test_reserved_offerings_are_nearly_free_and_count_what_is_left(aws: OfflineAWS,
                                                                          provider: AWSCloudProvider) -> None:
    odcr(aws, count=2)
    types = {t.name: t for t in await provider.instance_types(selecting(aws))}
    [reserved] = [o for o in types["m5.large"].offerings if o.capacity_type == "reserved"]
    on_demand = next(o for o in types["m5.large"].offerings
                     if o.capacity_type == "on-demand" and o.zone == "us-east-1b")
    assert reserved.price == pytest.approx(on_demand.price / 10_000_000)
    assert (reserved.zone, reserved.reservation_id, reserved.reservation_capacity, reserved.available) == (
        "us-east-1b", ODCR, 2, True)
    assert not any(o.capacity_type == "reserved" for o in types["c5.large"].offerings)


async def test_a_reserved_launch_targets_the_reservation(aws: OfflineAWS, provider: AWSCloudProvider) -> None:
    odcr(aws, count=2)
    nodeclass = selecting(aws)
    recorder = Recorder().attach(provider)
    instance = await provider.create(request(), nodeclass)
    assert (instance.instance_type, instance.zone, instance.capacity_type) == ("m5.large", "us-east-1b", "reserved")
    assert instance.labels[wk.CAPACITY_RESERVATION_ID] == ODCR
    assert instance.labels[wk.CAPACITY_RESERVATION_TYPE] == "default"
    [fleet] = recorder.of("CreateFleet")
    assert fleet["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    assert fleet["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    [config] = fleet["LaunchTemplateConfigs"]
    assert [(o["InstanceType"], o["AvailabilityZone"]) for o in config["Overrides"]] == [("m5.large", "us-east-1b")]
    template = recorder.fleet_template()
    assert template["LaunchTemplateData"]["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": ODCR},
    }
    # EC2 itself says so: DescribeInstances shows the reservation, so the provider reads it back reserved.
    again = await provider.get(instance.provider_id)
    assert again.capacity_type == "reserved" and again.labels[wk.CAPACITY_RESERVATION_ID] == ODCR
    described = aws.client("ec2").describe_capacity_reservations(CapacityReservationIds=[ODCR])
    assert described["CapacityReservations"][0]["AvailableInstanceCount"] == 1


async def test_other_launches_opt_out_of_open_reservations(aws: OfflineAWS, provider: AWSCloudProvider) -> None:
    recorder = Recorder().attach(provider)
    await provider.create(request("nc-s", "spot"), aws.nodeclass())
    template = recorder.fleet_template()
    assert template["LaunchTemplateData"]["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "none"}


async def test_the_gate_off_neither_resolves_nor_targets_reservations(aws: OfflineAWS) -> None:
    odcr(aws)
    provider = make_provider(aws, reserved_capacity=False)
    try:
        recorder = Recorder().attach(provider)
        status = await provider.nodeclass_status(selecting(aws))
        assert "capacityReservations" not in status
        assert "CapacityReservationsReady" not in {c["type"] for c in status["conditions"]}
        instance = await provider.create(request(), selecting(aws))
        assert instance.capacity_type != "reserved"
        assert not recorder.of("DescribeCapacityReservations")
        assert "CapacityReservationSpecification" not in recorder.of("CreateLaunchTemplate")[0]["LaunchTemplateData"]
    finally:
        provider.close()


async def test_a_full_reservation_falls_back_and_is_learned(aws: OfflineAWS, provider: AWSCloudProvider) -> None:
    odcr(aws, count=1)
    nodeclass = selecting(aws)
    first = await provider.create(request("nc-1"), nodeclass)
    assert first.capacity_type == "reserved"
    # One instance fewer: the reserved offering is gone until one is given back, the next launch is spot.
    types = {t.name: t for t in await provider.instance_types(nodeclass)}
    [reserved] = [o for o in types["m5.large"].offerings if o.capacity_type == "reserved"]
    assert (reserved.reservation_capacity, reserved.available) == (0, False)
    assert (await provider.create(request("nc-2"), nodeclass)).capacity_type == "spot"
    await provider.delete(first.provider_id)
    types = {t.name: t for t in await provider.instance_types(nodeclass)}
    assert any(o.available for o in types["m5.large"].offerings if o.capacity_type == "reserved")


async def test_ec2_refusing_a_reserved_launch_marks_the_reservation_full(aws: OfflineAWS,
                                                                         provider: AWSCloudProvider) -> None:
    odcr(aws, count=1)
    nodeclass = selecting(aws)
    await provider.instance_types(nodeclass)
    aws.add_capacity_reservation(CapacityReservation(  # someone else took the last instance
        id=ODCR, instance_type="m5.large", zone="us-east-1b", owner_id=aws.account_id, available=0, total=1,
        tags={"team": aws.cluster}))
    with pytest.raises(InsufficientCapacityError):
        await provider.create(request("nc-1", "reserved"), nodeclass)
    assert provider.reservations.available(ODCR) == 0
    assert provider.unavailable.is_reservation_unavailable(ODCR)


async def test_a_capacity_block_launches_as_one(aws: OfflineAWS, provider: AWSCloudProvider) -> None:
    end = datetime.now(UTC) + timedelta(days=1)
    aws.add_capacity_reservation(CapacityReservation(
        id=BLOCK, instance_type="g5.xlarge", zone="us-east-1a", owner_id=aws.account_id,
        reservation_type="capacity-block", end_time=end, available=1, total=1, tags={"team": aws.cluster}))
    recorder = Recorder().attach(provider)
    instance = await provider.create(request("nc-b", types=("g5.xlarge",)), selecting(aws))
    assert instance.capacity_type == "reserved"
    assert instance.labels[wk.CAPACITY_RESERVATION_TYPE] == "capacity-block"
    [fleet] = recorder.of("CreateFleet")
    assert fleet["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "capacity-block"
    assert "OnDemandOptions" not in fleet
    data = recorder.fleet_template()["LaunchTemplateData"]
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    described = await provider.get(instance.provider_id)
    assert described.labels[wk.CAPACITY_RESERVATION_TYPE] == "capacity-block"
    # Within 40 minutes of the end no launch goes into it.
    [found] = (await provider.capacity_reservations([BLOCK])).values()
    assert found.expiring(end - timedelta(minutes=40)) and not found.expiring(end - timedelta(minutes=41))


async def test_a_reservation_no_longer_selected_drifts(aws: OfflineAWS, provider: AWSCloudProvider,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from reconciler.cloud.aws.moto_patches import _FleetPatchState

    monkeypatch.setattr(_FleetPatchState, "security_groups", True)  # instances in their template's groups
    odcr(aws)
    nodeclass = selecting(aws)
    instance = await provider.create(request(), nodeclass)
    assert await provider.is_drifted(instance, nodeclass) is None
    changed = copy.deepcopy(nodeclass)
    changed["spec"]["capacityReservationSelectorTerms"] = [{"tags": {"team": "nobody"}}]
    assert await provider.is_drifted(instance, changed) == CAPACITY_RESERVATION_DRIFT


def test_user_data_is_unchanged_by_targeting(aws: OfflineAWS) -> None:
    """Targeting lives in the template's reservation fields only (the user data is the same bytes)."""
    from reconciler.cloud.aws.launchtemplate import LaunchTemplateSpec

    base = LaunchTemplateSpec("ami-1", "#!/bin/bash", "p", ("sg-1",), (), {}, {})
    targeted = LaunchTemplateSpec("ami-1", "#!/bin/bash", "p", ("sg-1",), (), {}, {}, capacity_reservation=ODCR)
    assert base.data()["UserData"] == targeted.data()["UserData"] == base64.b64encode(b"#!/bin/bash").decode()
    assert base.name != targeted.name
