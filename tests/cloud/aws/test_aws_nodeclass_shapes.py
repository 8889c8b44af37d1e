"""One NodeClass shaping for the live provider and the offline presets; zone IDs; a1 under AL2023; Windows.

The live provider (against moto) and the preset must give a NodeClass the same capacity, overhead and
labels for a type, whatever its AMI family, kubelet and storage settings; zone IDs come from the
NodeClass's subnets (live) or the bundled zone table (preset) and are enforced at launch.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_harness import make_provider

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.preset import load_catalog, load_preset
from reconciler.cloud.types import LaunchRequest
from reconciler.kube.api import NODE, NODECLAIM
from reconciler.model import labels as wk
from reconciler.sim.runner import Simulation, run_scenario
from reconciler.sim.scenario import parse_scenario

SHAPES = {
    "bottlerocket": {"amiSelectorTerms": [{"alias": "bottlerocket@latest"}], "kubelet": {"maxPods": 110}},
    "kubelet-and-raid0": {
        "kubelet": {"maxPods": 20, "kubeReserved": {"cpu": "300m"}, "evictionHard": {"memory.available": "5%"}},
        "instanceStorePolicy": "RAID0",
    },
    "al2-bigger-root": {
        "amiSelectorTerms": [{"alias": "al2@latest"}],
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "80Gi"}}],
    },
}
COMPARED = ("m5.large", "m5.4xlarge", "c6g.xlarge", "r5.2xlarge", "g5.xlarge", "m6i.metal", "c5.large")


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_preset_shapes_a_nodeclass_exactly_as_the_live_provider(aws: OfflineAWS, shape: str) -> None:
    nodeclass = aws.nodeclass(shape, **SHAPES[shape])
    if "al2@" in str(nodeclass["spec"]["amiSelectorTerms"]):
        pytest.skip("moto is seeded with AL2023 and Bottlerocket aliases only")
    provider = make_provider(aws)
    try:
        live = {t.name: t for t in await provider.instance_types(nodeclass)}
    finally:
        provider.close()
    offline = {t.name: t for t in load_preset(nodeclass=nodeclass)}
    assert live, "the NodeClass must resolve in moto"
    for name in COMPARED:
        assert (live[name].capacity, live[name].overhead) == (offline[name].capacity, offline[name].overhead), name
        assert dict(live[name].labels) == dict(offline[name].labels), name
    default = {t.name: t for t in load_preset()}
    assert any(offline[n].allocatable != default[n].allocatable for n in COMPARED), "the shape must matter"


def test_offline_preset_honours_kubelet_bottlerocket_and_raid0() -> None:
    base = {t.name: t for t in load_preset()}
    kubelet = {t.name: t for t in load_preset(nodeclass={"spec": SHAPES["kubelet-and-raid0"]})}
    assert kubelet["m5.large"].capacity.amount("pods") == 20_000 != base["m5.large"].capacity.amount("pods")
    # RAID0: ephemeral storage is the NVMe instance store (m5d.large: 75 GB), not the 20Gi root volume.
    assert kubelet["m5d.large"].capacity.amount("ephemeral-storage") == 75 * 10**9 * 1000
    # Bottlerocket reserves kube memory for the pods it really runs (maxPods), AL2023 for the ENI limit.
    bottlerocket = {t.name: t for t in load_preset(nodeclass={"spec": SHAPES["bottlerocket"]})}
    al2023 = {t.name: t for t in load_preset(nodeclass={"spec": {"kubelet": {"maxPods": 110}}})}
    assert bottlerocket["m5.large"].capacity.amount("pods") == al2023["m5.large"].capacity.amount("pods") == 110_000
    assert bottlerocket["m5.large"].overhead.amount("memory") > al2023["m5.large"].overhead.amount("memory")


def test_a1_types_are_unavailable_under_al2023_only() -> None:
    """reference/aws.md §4: the AL2023 AMIs do not support a1; AL2 does."""
    al2023 = {t.name: t for t in load_preset()}
    al2 = {t.name: t for t in load_preset(nodeclass={"spec": {"amiSelectorTerms": [{"alias": "al2@latest"}]}})}
    assert not any(o.available for o in al2023["a1.large"].offerings)
    assert any(o.available for o in al2["a1.large"].offerings)


async def test_live_provider_marks_a1_unavailable_under_al2023(aws: OfflineAWS) -> None:
    provider = make_provider(aws, instance_type_filters=({"Name": "instance-type", "Values": ["a1.*", "m6g.*"]},))
    try:
        types = {t.name: t for t in await provider.instance_types(aws.nodeclass())}
    finally:
        provider.close()
    assert types["a1.large"].offerings and not any(o.available for o in types["a1.large"].offerings)
    assert any(o.available for o in types["m6g.large"].offerings)


async def test_live_offerings_carry_the_subnets_zone_ids_and_launches_honour_them(aws: OfflineAWS) -> None:
    ec2 = aws.client("ec2")
    zone_ids = {s["AvailabilityZone"]: s["AvailabilityZoneId"] for s in ec2.describe_subnets(
        SubnetIds=list(aws.subnet_ids.values()))["Subnets"]}
    provider = make_provider(aws)
    nodeclass = aws.nodeclass()
    try:
        types = {t.name: t for t in await provider.instance_types(nodeclass)}
        assert {(o.zone, o.zone_id) for o in types["m5.large"].offerings} == set(zone_ids.items())
        zone, zone_id = sorted(zone_ids.items())[-1]
        request = LaunchRequest(
            nodeclaim="zoned", nodepool="default", nodeclass="default", instance_types=["m5.large"],
            capacity_types=["on-demand"], zone_ids=[zone_id],
        )
        instance = await provider.create(request, nodeclass)
    finally:
        provider.close()
    assert (instance.zone, instance.labels[wk.ZONE_ID]) == (zone, zone_id)


def test_launch_request_reads_zone_id_requirements() -> None:
    claim = {"metadata": {"name": "c"}, "spec": {"requirements": [
        {"key": wk.ZONE_ID, "operator": "In", "values": ["use1-az1", "use1-az2"]},
        {"key": wk.ZONE_ID, "operator": "NotIn", "values": ["use1-az2"]},
    ]}}
    request = LaunchRequest.from_nodeclaim(claim)
    assert list(request.zone_ids or []) == ["use1-az1"]
    assert request.allows_zone_id("use1-az1") and not request.allows_zone_id("use1-az2")
    assert request.allows_zone_id("")  # an offering whose zone ID is unknown is not judged by it


def _pod_scenario(node_selector: dict[str, str], nodeclass_spec: dict[str, Any] | None = None) -> dict[str, Any]:
    objects: list[dict[str, Any]] = [
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"}, "spec": {"template": {
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]}]}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "default"},
         "spec": {"nodeSelector": node_selector,
                  "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}},
    ]
    if nodeclass_spec is not None:
        objects.insert(0, {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                           "metadata": {"name": "default"}, "spec": nodeclass_spec})
    return {"catalog": {"preset": "aws-us-east-1"}, "objects": objects, "steps": [{"provision": {}}]}


@pytest.mark.parametrize("zone_id", ["use1-az1", "use1-az2", "use1-az6"])
def test_pod_zone_id_selector_lands_in_that_zone_and_the_node_carries_it(zone_id: str) -> None:
    """The audit's repro: nodeSelector zone-id use1-az1 launched in us-east-1c (use1-az2)."""
    zone = {v: k for k, v in load_catalog().zone_ids.items()}[zone_id]
    sim = Simulation(parse_scenario(_pod_scenario({wk.ZONE_ID: zone_id})))
    result = asyncio.run(sim.run())
    [launched] = result["steps"][0]["launched"]
    assert launched["zone"] == zone
    assert result["final"]["pending"] == [] and result["steps"][0]["bound"] == {"default/a": launched["node"]}
    node = sim.kube.peek(NODE, launched["node"])
    claim = sim.kube.peek(NODECLAIM, launched["nodeclaim"])
    assert node["metadata"]["labels"][wk.ZONE_ID] == zone_id == claim["metadata"]["labels"][wk.ZONE_ID]


def test_hand_written_catalogue_in_a_real_region_gets_zone_ids(shared_dir: Path) -> None:
    document = yaml.safe_load((shared_dir / "scenarios" / "zone-spread.yaml").read_text())
    document["objects"].append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "z", "namespace": "default"},
                                "spec": {"nodeSelector": {wk.ZONE_ID: "use1-az2"}, "containers": [
                                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}})
    result = run_scenario(parse_scenario(document))
    placed = {pod: node for step in result["steps"] for pod, node in step["bound"].items()}
    zones = {n["name"]: n["zone"] for n in result["final"]["nodes"]}
    assert zones[placed["default/z"]] == "us-east-1c"


def test_karpenter_windows_2022_example_schedules_a_windows_pod(shared_dir: Path) -> None:
    """The published windows-2022.yaml NodePool + EC2NodeClass: a Windows pod gets a Windows node, with
    Karpenter's windows-build label, Windows pod density (110) and no arm64 option."""
    text = (shared_dir / "data" / "karpenter-examples" / "v1" / "windows-2022.yaml").read_text()
    examples = [d for d in yaml.safe_load_all(text.replace("${CLUSTER_NAME}", "demo")) if d]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w", "namespace": "default"},
           "spec": {"nodeSelector": {wk.OS: "windows", wk.WINDOWS_BUILD: "10.0.20348"}, "containers": [
               {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}
    scenario = {"catalog": {"preset": "aws-us-east-1"}, "objects": [*examples, pod], "steps": [{"provision": {}}]}
    result = run_scenario(parse_scenario(scenario))
    [launched] = result["steps"][0]["launched"]
    assert result["final"]["pending"] == []
    windows = {t.name: t for t in load_preset(nodeclass=next(d for d in examples if d["kind"] == "EC2NodeClass"))}
    assert set(launched["instanceTypeOptions"]) <= set(windows)
    chosen = windows[launched["instanceType"]]
    assert chosen.labels[wk.OS] == "windows" and chosen.labels[wk.WINDOWS_BUILD] == "10.0.20348"
    assert chosen.capacity.amount("pods") == 110_000 and chosen.arch == "amd64"
    assert wk.WINDOWS_BUILD not in {t.name: t for t in load_preset()}["m5.large"].labels
