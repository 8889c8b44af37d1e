"""``simulate --cloud moto``: the shared scenarios through the real AWS provider on moto match the simulated cloud.

The moto run goes through NodeClass resolution, launch templates, CreateFleet (overrides cheapest first,
which is what moto launches), instance tags, DescribeInstances and TerminateInstances; the result
document must equal the simulated run's in nodes and costs (here: in everything it reports).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli import main
from reconciler.cloud.aws import tags as owned
from reconciler.sim.runner import Simulation, moto_cloud, run_scenario
from reconciler.sim.scenario import ScenarioError, load_scenario_file, parse_scenario

SCENARIOS = ("inflate", "consolidation-replace", "nodepool-limits", "spot-and-on-demand", "zone-spread")


def _nodes_and_costs(result: dict[str, Any]) -> Any:
    steps = [
        [(item["nodeclaim"], item["instanceType"], item["zone"], item["capacityType"], item["price"],
          sorted(item["pods"])) for item in step["launched"]]
        for step in result["steps"]
    ]
    disrupted = [[(d["node"], d["reason"], d["action"], d.get("savingsPerHour")) for d in s["disrupted"]]
                 for s in result["steps"]]
    return steps, disrupted, result["final"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_shared_scenario_on_moto_matches_the_simulated_cloud(shared_dir: Path, name: str, capsys: Any) -> None:
    path = str(shared_dir / "scenarios" / f"{name}.yaml")
    simulated = run_scenario(load_scenario_file(path))

    assert main(["simulate", path, "--cloud", "moto", "--json"]) == 0
    captured = capsys.readouterr()
    on_moto = json.loads(captured.out)

    assert _nodes_and_costs(on_moto) == _nodes_and_costs(simulated)
    assert on_moto == simulated  # events, bound pods and pending reasons too
    assert "POST /" not in captured.err  # moto's access log stays quiet


def test_moto_run_really_launches_tags_and_terminates(shared_dir: Path) -> None:
    """consolidation-replace: the adopted m5.2xlarge is a real moto instance, terminated when replaced;
    the c5.large replacement carries the ownership tags and runs in the chosen subnet's zone."""
    scenario = load_scenario_file(shared_dir / "scenarios" / "consolidation-replace.yaml")

    async def run() -> tuple[dict[str, Any], list[dict[str, Any]], list[str], dict[str, str]]:
        sim = Simulation(scenario, cloud=moto_cloud)
        try:
            result = await sim.run()
            ec2 = sim.cloud.moto.env.client("ec2")
            reservations = ec2.describe_instances()["Reservations"]
            templates = [t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]]
            return result, [i for r in reservations for i in r["Instances"]], templates, sim.cloud.moto.env.ami_ids
        finally:
            sim.cloud.close()

    result, instances, templates, amis = asyncio.run(run())
    states = {(i["InstanceType"], i["State"]["Name"]) for i in instances}
    assert states == {("m5.2xlarge", "terminated"), ("c5.large", "running")}
    [replacement] = [i for i in instances if i["InstanceType"] == "c5.large"]
    tags = {t["Key"]: t["Value"] for t in replacement["Tags"]}
    [launched] = result["steps"][0]["launched"]
    assert tags[owned.NODECLAIM_TAG] == launched["nodeclaim"]
    assert tags[owned.NODEPOOL_TAG] == "default" and tags[owned.NODECLASS_TAG] == "default"
    assert tags[owned.EKS_CLUSTER_NAME_TAG] == "demo"  # the scenario's karpenter.sh/discovery value
    assert replacement["Placement"]["AvailabilityZone"] == launched["zone"]
    assert replacement["ImageId"] == amis["amd64/standard"]  # al2023@latest through the SSM alias
    assert templates and all(name.startswith("karpenter.k8s.aws/") for name in templates)


def test_moto_needs_real_types_and_region() -> None:
    scenario = {
        "catalog": {"zones": ["test-zone-1"], "region": "test-region", "instanceTypes": [
            {"name": "small", "capacity": {"cpu": "2", "memory": "2Gi", "pods": "5"},
             "offerings": [{"capacityType": "on-demand", "zone": "test-zone-1", "price": 0.1}]}]},
        "objects": [], "steps": [],
    }
    with pytest.raises(ScenarioError, match=r"catalog\.region: 'test-region' is not an AWS region"):
        run_scenario(parse_scenario(scenario), cloud="moto")
    scenario["catalog"] = {"region": "us-east-1", "instanceTypes": [
        {"name": "small.large", "capacity": {"cpu": "2", "memory": "2Gi", "pods": "5"},
         "offerings": [{"capacityType": "on-demand", "zone": "us-east-1a", "price": 0.1}]}]}
    with pytest.raises(ScenarioError, match=r"small\.large not EC2 instance types moto knows"):
        run_scenario(parse_scenario(scenario), cloud="moto")


def test_cli_reports_a_bad_moto_scenario_in_one_line(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "catalog: {region: test-region, instanceTypes: [{name: x, capacity: {cpu: '1', memory: 1Gi, pods: '3'},"
        " offerings: [{capacityType: spot, zone: z, price: 0.1}]}]}\nobjects: []\nsteps: []\n"
    )
    assert main(["simulate", str(path), "--cloud", "moto"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: catalog.region:") and len(err.strip().splitlines()) == 1
