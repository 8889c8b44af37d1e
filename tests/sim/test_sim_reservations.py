"""Capacity reservations in ``simulate``: launches into a targeted reservation (reserved capacity type,
reservation labels), consolidation keeps them, capacity blocks drain 40 minutes before their end, a
reservation no longer selected drifts, and the scenario key is validated."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.model import labels as wk
from reconciler.sim.runner import run_scenario
from reconciler.sim.scenario import ScenarioError, parse_scenario

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "capacity-reservation.yaml"
RESERVATION = "cr-0a1b2c3d4e5f60718"


def scenario() -> dict[str, Any]:
    return yaml.safe_load(EXAMPLE.read_text())


def run(document: dict[str, Any]) -> dict[str, Any]:
    return run_scenario(parse_scenario(document))


def test_targeted_reservation_is_launched_into_and_consolidation_keeps_it() -> None:
    """The issue's acceptance: real us-east-1 catalogue, a targeted ODCR selected by tag."""
    result = run(scenario())
    launched = result["steps"][0]["launched"]
    assert {(item["instanceType"], item["zone"], item["capacityType"]) for item in launched} == {
        ("m5.2xlarge", "us-east-1a", "reserved")}
    assert len(launched) == 2  # the reservation's two instances, no more
    disrupted = result["steps"][2]["disrupted"]
    assert [(d["reason"], d["action"]) for d in disrupted] == [("Empty", "delete")]
    [kept] = result["final"]["nodes"]
    assert kept["capacityType"] == "reserved" and kept["instanceType"] == "m5.2xlarge"
    assert kept["price"] == pytest.approx(0.384 / 10_000_000)


def test_reserved_nodes_carry_the_reservation_labels() -> None:
    from reconciler.sim.runner import Simulation

    document = scenario()
    document["steps"] = [{"provision": {}}]
    sim = Simulation(parse_scenario(document))
    import asyncio

    asyncio.run(sim.run())
    labels = [n["metadata"]["labels"] for n in sim.snapshot("Node")]
    assert labels and all(label[wk.CAPACITY_RESERVATION_ID] == RESERVATION for label in labels)
    assert all(label[wk.CAPACITY_RESERVATION_TYPE] == "default" for label in labels)
    assert all(label[wk.CAPACITY_RESERVATION_INTERRUPTIBLE] == "false" for label in labels)
    [nodeclass] = sim.snapshot("EC2NodeClass")
    assert [r["id"] for r in nodeclass["status"]["capacityReservations"]] == [RESERVATION]


def test_without_the_reservation_the_same_pods_go_to_spot() -> None:
    """Control: the reserved launch is the reservation's doing, not the pool's."""
    document = scenario()
    del document["catalog"]["capacityReservations"]
    result = run(document)
    assert {item["capacityType"] for item in result["steps"][0]["launched"]} == {"spot"}


def test_the_reserved_capacity_gate_off_ignores_reservations() -> None:
    document = scenario()
    document["settings"]["featureGates"] = {"ReservedCapacity": False}
    result = run(document)
    assert "reserved" not in {item["capacityType"] for item in result["steps"][0]["launched"]}


def test_consolidation_does_not_trade_a_reserved_node_for_spot() -> None:
    """A half-empty reserved node next to nothing else: on-demand list price would make a smaller spot node
    look cheaper, but reserved capacity is priced as prepaid and stays."""
    document = scenario()
    document["catalog"]["capacityReservations"][0]["totalInstanceCount"] = 1
    document["objects"][2]["spec"]["replicas"] = 2
    document["steps"] = [{"provision": {}}, {"advance": "10m"}, {"disrupt": {"until": "stable"}}]
    result = run(document)
    assert result["steps"][0]["launched"][0]["capacityType"] == "reserved"
    assert result["steps"][2]["disrupted"] == []
    assert [n["capacityType"] for n in result["final"]["nodes"]] == ["reserved"]


def capacity_block(end: str) -> dict[str, Any]:
    document = scenario()
    document["catalog"]["capacityReservations"][0].update(
        reservationType="capacity-block", endTime=end, totalInstanceCount=1, instanceType="p5.48xlarge")
    document["objects"][2]["spec"]["replicas"] = 1
    document["objects"][2]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}}
    return document


def test_a_capacity_block_is_launched_into_and_drained_40_minutes_before_its_end() -> None:
    document = capacity_block("2026-03-02T12:00:00Z")
    document["steps"] = [{"provision": {}}, {"advance": "2h19m"}, {"expire": {}}, {"advance": "1m"}, {"expire": {}}]
    result = run(document)
    [launched] = result["steps"][0]["launched"]
    assert (launched["instanceType"], launched["capacityType"]) == ("p5.48xlarge", "reserved")
    assert result["steps"][2]["disrupted"] == []  # 11:19: 41 minutes left
    [drained] = result["steps"][4]["disrupted"]  # 11:20: 40 minutes before the end
    assert drained["method"] == "capacity-block-expiration" and drained["reason"] == "Expired"
    # Its pod is re-homed, and not into the expiring block.
    assert all(item["capacityType"] != "reserved" for item in result["steps"][4]["launched"])


def test_an_expiring_capacity_block_takes_no_new_launch() -> None:
    document = capacity_block("2026-03-02T09:30:00Z")  # within 40 minutes of the clock
    result = run(document)
    launched = result["steps"][0]["launched"]
    assert launched and all(item["capacityType"] != "reserved" for item in launched)


def test_a_reservation_no_longer_selected_drifts_the_node() -> None:
    document = scenario()
    document["objects"][2]["spec"]["replicas"] = 2
    nodeclass = copy.deepcopy(document["objects"][0])
    nodeclass["spec"]["capacityReservationSelectorTerms"] = [{"tags": {"team": "search"}}]
    document["steps"] = [{"provision": {}}, {"apply": [nodeclass]}, {"disrupt": {}}]
    result = run(document)
    [drifted] = result["steps"][2]["disrupted"]
    assert drifted["reason"] == "Drifted"
    assert result["final"]["nodes"][0]["capacityType"] == "spot"


@pytest.mark.parametrize(("change", "message"), [
    ({"id": "r-1"}, "catalog.capacityReservations[0].id"),
    ({"instanceType": "m9.huge"}, "catalog.capacityReservations[0].instanceType"),
    ({"reservationType": "capacity-block"}, "catalog.capacityReservations[0].endTime: required"),
    ({"availableInstanceCount": 5}, "exceeds totalInstanceCount"),
    ({"colour": "red"}, "catalog.capacityReservations[0].colour: unknown key"),
])
def test_bad_reservations_are_named(change: dict[str, Any], message: str) -> None:
    document = scenario()
    document["catalog"]["capacityReservations"][0].update(change)
    with pytest.raises(ScenarioError, match=re.escape(message)):
        run(document)


def test_a_reservation_interruption_drains_the_node_and_marks_the_reservation_full() -> None:
    document = scenario()
    document["objects"][2]["spec"]["replicas"] = 2
    document["catalog"]["capacityReservations"][0]["totalInstanceCount"] = 3
    document["steps"] = [{"provision": {}}]
    first = run(document)
    node = first["final"]["nodes"][0]["name"]
    document["steps"] = [{"provision": {}},
                         {"interrupt": {"node": node, "kind": "capacity_reservation_interrupted"}}]
    result = run(document)
    [interrupted] = result["steps"][1]["disrupted"]
    assert (interrupted["node"], interrupted["reason"]) == (node, "Interrupted")
    # Two instances were left in the reservation, but EC2 is reclaiming it: the pods go elsewhere.
    assert {item["capacityType"] for item in result["steps"][1]["launched"]} == {"spot"}


def test_the_real_aws_provider_on_moto_decides_the_same() -> None:
    """``simulate --cloud moto``: DescribeCapacityReservations, targeted launch templates, CreateFleet and
    DescribeInstances (moto patched with reservations) give the same result document as the simulated cloud."""
    document = scenario()
    simulated = run(document)
    on_moto = run_scenario(parse_scenario(scenario()), cloud="moto")

    def decisions(result: dict[str, Any]) -> Any:
        return ([[(i["instanceType"], i["zone"], i["capacityType"], i["price"]) for i in s["launched"]]
                 for s in result["steps"]],
                [[(d["reason"], d["action"]) for d in s["disrupted"]] for s in result["steps"]],
                result["final"]["costPerHour"])

    assert decisions(on_moto) == decisions(simulated)
    assert {i["capacityType"] for i in on_moto["steps"][0]["launched"]} == {"reserved"}
