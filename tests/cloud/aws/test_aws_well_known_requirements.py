"""Every well-known label as a requirement on the real aws-us-east-1 catalogue.

For each label there are NodePool (and pod affinity) requirements with In / NotIn /
Exists / DoesNotExist / Gt / Lt. The expected answer is computed here from the
bundled catalogue JSON alone, with the label rules of Karpenter's AWS provider
(``computeRequirements``: a type without GPUs has ``instance-gpu-count
DoesNotExist``, so ``Gt 0`` excludes it) written out independently of the code
under test. The pod asks for 100m CPU only, so every type fits it. The simulator
must launch a type whose every option satisfies the requirement, at the cheapest
on-demand price among the types that do (generic types first: metal, GPU and
accelerator types only when nothing generic fits).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from importlib import resources
from typing import Any

import pytest

from reconciler.sim.runner import run_scenario
from reconciler.sim.scenario import parse_scenario

REGION = "us-east-1"
AWS = "karpenter.k8s.aws/"
GPU_MAKERS = {"nvidia", "amd", "habana"}


def _catalogue() -> dict[str, dict[str, Any]]:
    """The generated catalogue plus the hand-sourced supplement (the generated one wins on overlap)."""
    data = resources.files("reconciler.cloud").joinpath("data")
    supplement = json.loads(data.joinpath(f"aws-{REGION}-supplement.json").read_text())["types"]
    facts = json.loads(data.joinpath("aws-instance-types.json").read_text())["types"]
    offered = json.loads(data.joinpath(f"aws-{REGION}.json").read_text())["types"]
    return {**supplement, **{name: {**facts[name], **record} for name, record in offered.items()}}


CATALOGUE = _catalogue()
ZONE_IDS = json.loads(resources.files("reconciler.cloud").joinpath("data", f"aws-{REGION}.json").read_text())["zones"]
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE_ID = "topology.k8s.aws/zone-id"


def _kebab(text: str) -> str:
    return text.lower().replace(" ", "-")


def expected_labels(name: str, record: dict[str, Any]) -> dict[str, str]:
    """The labels a type carries, from its catalogue record; a key that is absent means DoesNotExist."""
    family, _, size = name.partition(".")
    arch = {"x86_64": "amd64", "arm64": "arm64"}[record["arch"][0]]
    labels = {
        "node.kubernetes.io/instance-type": name,
        "kubernetes.io/arch": arch,
        "kubernetes.io/os": "linux",
        "topology.kubernetes.io/region": REGION,
        AWS + "instance-family": family,
        AWS + "instance-size": size,
        AWS + "instance-cpu": str(record["cpu"]),
        AWS + "instance-memory": str(record["mem"]),
        AWS + "instance-hypervisor": record.get("hv", ""),
        AWS + "instance-encryption-in-transit-supported": "true" if record.get("eit") else "false",
        AWS + "instance-capability-flex": "true" if "-flex" in family else "false",
        AWS + "instance-tenancy": "default",
        AWS + "nitro-sandbox": "true" if record.get("enclaves") else "false",
    }
    scheme = re.match(r"^([a-z]+)(-[0-9]+tb)?([0-9]+).*\.", name)
    if scheme:
        labels[AWS + "instance-category"] = scheme.group(1)
        labels[AWS + "instance-generation"] = scheme.group(3)
    optional = {
        "instance-local-nvme": record.get("nvme"),
        "instance-cpu-manufacturer": _kebab(record["cpuMfr"]) if record.get("cpuMfr") else None,
        "instance-cpu-sustained-clock-speed-mhz": record.get("mhz"),
        "instance-ebs-bandwidth": record.get("ebsMbps"),
        "instance-network-bandwidth": record.get("netMbps"),
    }
    labels.update({AWS + key: str(value) for key, value in optional.items() if value})
    gpus = record.get("gpu") or []
    if len(gpus) == 1:
        gpu_name, maker, count, memory, _ = gpus[0]
        labels[AWS + "instance-gpu-name"] = _kebab(gpu_name)
        labels[AWS + "instance-gpu-manufacturer"] = _kebab(maker)
        labels[AWS + "instance-gpu-count"] = str(count)
        labels[AWS + "instance-gpu-memory"] = str(memory)
    accelerators = record.get("neuron") or record.get("infer") or []
    if len(accelerators) == 1:
        accel_name, maker, count, _, _ = accelerators[0]
        labels[AWS + "instance-accelerator-name"] = _kebab(accel_name)
        labels[AWS + "instance-accelerator-manufacturer"] = _kebab(maker)
        labels[AWS + "instance-accelerator-count"] = str(count)
    return labels


def is_exotic(name: str, record: dict[str, Any]) -> bool:
    gpu = any(str(g[1]).lower() in GPU_MAKERS for g in record.get("gpu") or [])
    return "metal" in name.partition(".")[2] or gpu or bool(record.get("neuron") or record.get("infer"))


def satisfies(value: str | None, operator: str, values: list[str]) -> bool:
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if value is None:
        return False
    bound = int(values[0])
    return int(value) > bound if operator == "Gt" else int(value) < bound


def zone_ok(record: dict[str, Any], zone: str | None) -> bool:
    return zone is None or zone[-1] in record["zones"]


def spot_price(name: str, zone: str, on_demand: float) -> float:
    """The preset's documented spot estimate: SHA-256 of "<type>/<zone>" maps to 30-45% of on-demand."""
    unit = int.from_bytes(hashlib.sha256(f"{name}/{zone}".encode()).digest()[:8], "big") / 2**64
    return round(on_demand * (0.30 + 0.15 * unit), 6)


def offerings(name: str, record: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(capacity type, zone, price) of every offering the preset gives the type."""
    usage = record.get("usage") or ["on-demand", "spot"]
    result = []
    for suffix in record["zones"]:
        zone = f"{REGION}{suffix}"
        if "on-demand" in usage:
            result.append(("on-demand", zone, float(record["od"])))
        if "spot" in usage:
            result.append(("spot", zone, spot_price(name, zone, float(record["od"]))))
    return result


@functools.cache
def _catalogue_labels(name: str) -> dict[str, str]:
    """``expected_labels`` of a catalogue type, worked out once per run (every case reads every type's)."""
    return expected_labels(name, CATALOGUE[name])


def expected_prices(key: str, operator: str, values: list[str]) -> tuple[set[str], float]:
    """Types meeting the requirement with an allowed offering, and the cheapest price a launch may pay.

    Capacity type is on-demand unless the case is about capacity type. a1 types are out: the AL2023
    AMIs (the default NodeClass) do not run on them (Karpenter's compatibility check)."""
    matching: dict[str, float] = {}
    for name, record in CATALOGUE.items():
        if name.startswith("a1."):
            continue
        labels = _catalogue_labels(name)
        if key not in (CAPACITY_TYPE, "topology.kubernetes.io/zone", ZONE_ID) and not satisfies(
            labels.get(key), operator, values
        ):
            continue
        prices = []
        for capacity_type, zone, price in offerings(name, record):
            by_key = {CAPACITY_TYPE: capacity_type, "topology.kubernetes.io/zone": zone, ZONE_ID: ZONE_IDS[zone]}
            if key != CAPACITY_TYPE and capacity_type != "on-demand":
                continue
            if key in by_key and not satisfies(by_key[key], operator, values):
                continue
            prices.append(price)
        if prices:
            matching[name] = min(prices)
    assert matching, f"no type satisfies {key} {operator} {values}: the case is wrong"
    generic = {n: p for n, p in matching.items() if not is_exotic(n, CATALOGUE[n])}
    pool = generic or matching
    return set(matching), min(pool.values())


# (label, operator, values): at least one case per well-known label; GPU, accelerator, NVMe and
# the other "only when the type has it" labels also get Exists/Gt so absence must exclude.
CASES: list[tuple[str, str, list[str]]] = [
    ("node.kubernetes.io/instance-type", "In", ["m5.large", "c5.xlarge"]),
    ("node.kubernetes.io/instance-type", "NotIn", ["t4g.nano", "t3a.nano", "t4g.micro"]),
    ("kubernetes.io/arch", "In", ["amd64"]),
    ("kubernetes.io/os", "In", ["linux"]),
    ("topology.kubernetes.io/region", "In", [REGION]),
    ("topology.kubernetes.io/zone", "In", ["us-east-1e"]),
    ("topology.kubernetes.io/zone", "NotIn", ["us-east-1a", "us-east-1b", "us-east-1c"]),
    ("node.kubernetes.io/windows-build", "DoesNotExist", []),
    (AWS + "instance-category", "In", ["r"]),
    (AWS + "instance-category", "NotIn", ["t", "c", "m", "a"]),
    (AWS + "instance-family", "In", ["m6i", "c7a"]),
    (AWS + "instance-generation", "Gt", ["7"]),
    (AWS + "instance-generation", "Lt", ["5"]),
    (AWS + "instance-size", "In", ["2xlarge"]),
    (AWS + "instance-size", "NotIn", ["nano", "micro", "small", "medium", "large"]),
    (AWS + "instance-cpu", "Gt", ["31"]),
    (AWS + "instance-cpu", "Lt", ["4"]),
    (AWS + "instance-memory", "Gt", ["65536"]),
    (AWS + "instance-cpu-manufacturer", "In", ["amd"]),
    (AWS + "instance-cpu-manufacturer", "In", ["aws"]),
    (AWS + "instance-cpu-sustained-clock-speed-mhz", "Gt", ["3500"]),
    (AWS + "instance-ebs-bandwidth", "Gt", ["20000"]),
    (AWS + "instance-network-bandwidth", "Gt", ["50000"]),
    (AWS + "instance-hypervisor", "In", ["xen"]),
    (AWS + "instance-hypervisor", "In", [""]),
    (AWS + "instance-encryption-in-transit-supported", "In", ["true"]),
    (AWS + "instance-encryption-in-transit-supported", "In", ["false"]),
    (AWS + "instance-capability-flex", "In", ["true"]),
    (AWS + "instance-tenancy", "In", ["default"]),
    (AWS + "nitro-sandbox", "In", ["true"]),
    (AWS + "nitro-sandbox", "In", ["false"]),
    (AWS + "capacity-reservation-id", "DoesNotExist", []),
    (AWS + "capacity-reservation-type", "DoesNotExist", []),
    (AWS + "capacity-reservation-interruptible", "DoesNotExist", []),
    (CAPACITY_TYPE, "In", ["on-demand"]),
    (CAPACITY_TYPE, "In", ["spot"]),
    (CAPACITY_TYPE, "NotIn", ["on-demand"]),
    (ZONE_ID, "In", ["use1-az1"]),
    (ZONE_ID, "NotIn", ["use1-az6", "use1-az1", "use1-az2", "use1-az4"]),
    (AWS + "instance-gpu-count", "Gt", ["0"]),
    (AWS + "instance-gpu-count", "Gt", ["3"]),
    (AWS + "instance-gpu-count", "DoesNotExist", []),
    (AWS + "instance-gpu-name", "In", ["a10g"]),
    (AWS + "instance-gpu-name", "Exists", []),
    (AWS + "instance-gpu-manufacturer", "In", ["nvidia"]),
    (AWS + "instance-gpu-manufacturer", "NotIn", ["nvidia"]),
    (AWS + "instance-gpu-memory", "Gt", ["40000"]),
    (AWS + "instance-accelerator-name", "In", ["inferentia2"]),
    (AWS + "instance-accelerator-manufacturer", "In", ["aws"]),
    (AWS + "instance-accelerator-count", "Gt", ["0"]),
    (AWS + "instance-local-nvme", "Gt", ["300"]),
    (AWS + "instance-local-nvme", "Exists", []),
    (AWS + "instance-local-nvme", "Lt", ["100"]),
    (AWS + "instance-local-nvme", "DoesNotExist", []),
]


def _case_id(case: tuple[str, str, list[str]]) -> str:
    key, operator, values = case
    return f"{key.rpartition('/')[2]}-{operator}-{','.join(values) or '_'}"


def _scenario(expression: dict[str, Any], on_pod: bool) -> dict[str, Any]:
    pool_requirements = []
    if expression["key"] != CAPACITY_TYPE:
        pool_requirements.append({"key": CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]})
    if not on_pod:
        pool_requirements.append(expression)
    pod_spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]
    }
    if on_pod:
        pod_spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [expression]}]}}}
    return {
        "catalog": {"preset": f"aws-{REGION}"},
        "objects": [
            {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"}, "spec": {"template": {
                "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                         "requirements": pool_requirements}}}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "default"}, "spec": pod_spec},
        ],
        "steps": [{"provision": {}}],
    }


@pytest.mark.parametrize("on_pod", [False, True], ids=["nodepool", "pod-affinity"])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_well_known_label_requirement(case: tuple[str, str, list[str]], on_pod: bool) -> None:
    key, operator, values = case
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expression["values"] = values
    matching, cheapest = expected_prices(key, operator, values)

    result = run_scenario(parse_scenario(_scenario(expression, on_pod)))

    assert result["final"]["pending"] == [], result["final"]["pending"]
    [launched] = result["steps"][0]["launched"]
    outside = [name for name in launched["instanceTypeOptions"] if name not in matching]
    assert outside == [], f"options that do not satisfy {key} {operator} {values}: {outside[:10]}"
    assert launched["instanceType"] in matching
    assert launched["price"] == pytest.approx(cheapest), (launched["instanceType"], cheapest)
    if key == ZONE_ID:
        assert satisfies(ZONE_IDS[launched["zone"]], operator, values), launched["zone"]
    if key == CAPACITY_TYPE:
        assert satisfies(launched["capacityType"], operator, values), launched["capacityType"]


def test_pod_node_selector_on_gpu_labels_launches_gpu_type() -> None:
    """nodeSelector (not only affinity) on an AWS-only label: exactly the types that carry that value."""
    scenario = _scenario({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}, True)
    scenario["objects"][1]["spec"]["nodeSelector"] = {AWS + "instance-gpu-manufacturer": "nvidia",
                                                      AWS + "instance-gpu-count": "4"}
    matching, _ = expected_prices(AWS + "instance-gpu-count", "In", ["4"])
    maker = AWS + "instance-gpu-manufacturer"
    nvidia = {n for n in matching if expected_labels(n, CATALOGUE[n]).get(maker) == "nvidia"}

    result = run_scenario(parse_scenario(scenario))

    [launched] = result["steps"][0]["launched"]
    assert set(launched["instanceTypeOptions"]) <= nvidia
    assert launched["price"] == pytest.approx(min(float(CATALOGUE[n]["od"]) for n in nvidia))


def test_generic_pod_never_gets_metal_or_gpu_while_generic_fits() -> None:
    """A pool allowing only large sizes lists metal and GPU types among its options; a generic one launches."""
    expression = {"key": AWS + "instance-cpu", "operator": "In", "values": ["96"]}
    result = run_scenario(parse_scenario(_scenario(expression, False)))
    [launched] = result["steps"][0]["launched"]
    options = launched["instanceTypeOptions"]
    assert any(is_exotic(n, CATALOGUE[n]) for n in options), "the case must offer exotic options"
    assert not is_exotic(launched["instanceType"], CATALOGUE[launched["instanceType"]])


def test_simulated_cloud_skips_cheaper_metal_and_gpu_options() -> None:
    """Same rule in the simulated cloud: metal and GPU types priced below a generic one are not launched."""
    capacity = {"cpu": "64", "memory": "128Gi", "pods": "110"}
    offering = [{"capacityType": "on-demand", "zone": "z1", "price": 0}]
    types = [
        {"name": "big.metal", "capacity": capacity, "offerings": [{**offering[0], "price": 1.0}]},
        {"name": "gpu.16xlarge", "capacity": {**capacity, "nvidia.com/gpu": "4"},
         "offerings": [{**offering[0], "price": 1.5}]},
        {"name": "big.16xlarge", "capacity": capacity, "offerings": [{**offering[0], "price": 2.0}]},
    ]
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"}, "spec": {"template": {
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": []}}}}

    def launched_for(requests: dict[str, str]) -> str:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "default"},
               "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": requests,
                                                                                  "limits": requests}}]}}
        scenario = {"catalog": {"zones": ["z1"], "region": "r", "instanceTypes": types},
                    "objects": [pool, pod], "steps": [{"provision": {}}]}
        return run_scenario(parse_scenario(scenario))["steps"][0]["launched"][0]["instanceType"]

    assert launched_for({"cpu": "1"}) == "big.16xlarge"
    assert launched_for({"cpu": "1", "nvidia.com/gpu": "1"}) == "gpu.16xlarge"


LEGACY_SELECTORS = [
    ({"beta.kubernetes.io/arch": "arm64"}, "kubernetes.io/arch", "arm64"),
    ({"beta.kubernetes.io/os": "linux"}, "kubernetes.io/os", "linux"),
    ({"beta.kubernetes.io/instance-type": "m5.large"}, "node.kubernetes.io/instance-type", "m5.large"),
    ({"failure-domain.beta.kubernetes.io/zone": "us-east-1b"}, "topology.kubernetes.io/zone", "us-east-1b"),
    ({"failure-domain.beta.kubernetes.io/region": REGION}, "topology.kubernetes.io/region", REGION),
    ({"topology.ebs.csi.aws.com/zone": "us-east-1c"}, "topology.kubernetes.io/zone", "us-east-1c"),
]


@pytest.mark.parametrize(("selector", "stable", "value"), LEGACY_SELECTORS, ids=lambda v: str(v))
def test_legacy_label_keys_schedule_as_their_stable_names(selector: dict[str, str], stable: str, value: str) -> None:
    """nodeSelector and affinity on deprecated keys are read as the stable keys (Karpenter's NormalizedLabels)."""
    [(legacy, _)] = selector.items()
    for use_affinity in (False, True):
        expression = {"key": legacy, "operator": "In", "values": [value]} if use_affinity else None
        scenario = _scenario(expression or {"key": "karpenter.sh/capacity-type", "operator": "In",
                                            "values": ["on-demand"]}, True)
        if not use_affinity:
            scenario["objects"][1]["spec"]["nodeSelector"] = selector
        result = run_scenario(parse_scenario(scenario))
        [launched] = result["steps"][0]["launched"]
        assert result["final"]["pending"] == []
        assert result["steps"][0]["bound"] == {"default/a": launched["node"]}
        if stable == "topology.kubernetes.io/zone":
            assert launched["zone"] == value
        elif stable != "topology.kubernetes.io/region":
            assert all(expected_labels(n, CATALOGUE[n])[stable] == value for n in launched["instanceTypeOptions"])


def test_legacy_key_disagreeing_with_its_stable_key_stays_pending() -> None:
    scenario = _scenario({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}, True)
    scenario["objects"][1]["spec"]["nodeSelector"] = {"beta.kubernetes.io/arch": "arm64", "kubernetes.io/arch": "amd64"}
    result = run_scenario(parse_scenario(scenario))
    assert result["final"]["pending"] == ["default/a"]
