"""Every AMI family renders every kubelet field as it is modelled (issue 26 item 6).

For each family (AL2, AL2023, Bottlerocket, Windows) x each ``spec.kubelet`` field x real us-east-1
catalogue types, the user data comes from the launch path itself (``Launcher.template_spec``), is read
back the way the AMI reads it (MIME + bootstrap.sh words + kubelet flags, TOML, PowerShell
arguments, nodeadm YAML: ``userdata_readback``), and then:

* every field the class sets reaches the node with its value (a dropped or mistyped field fails);
* the node's reserved and eviction figures (what it sets, else the AMI default) equal Adze's
  allocatable model (``NodeClassShape``, what scheduling uses), and so does its pod count;
* RAID0 makes each family assemble the instance-store disks the model counts as ephemeral storage.
"""

from __future__ import annotations

from typing import Any

import pytest
from userdata_readback import al2_bootstrap, bottlerocket_settings, kubelet_config, node_overhead, node_pods

from reconciler.api.amifamily import FAMILIES, unsupported_settings
from reconciler.cloud.aws.instancetype import NodeClassShape
from reconciler.cloud.aws.launch import Launcher
from reconciler.cloud.aws.nodeclass import ResolvedNodeClass, SecurityGroup
from reconciler.cloud.aws.preset import load_catalog
from reconciler.cloud.aws.userdata import ClusterInfo
from reconciler.cloud.types import LaunchRequest
from reconciler.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS

CLUSTER = ClusterInfo("demo", "https://api.example", "Q0EtYnVuZGxl", dns_ip="10.100.0.10",
                      service_cidr="10.100.0.0/16")
INFOS = {entry.info.name: entry.info for entry in load_catalog("us-east-1").entries}
TYPES = ("m5.large", "c6g.xlarge", "r5.4xlarge", "t3.micro", "m6i.32xlarge")
FAMILY_ALIASES = {"AL2": "al2@latest", "AL2023": "al2023@latest", "Bottlerocket": "bottlerocket@latest",
                  "Windows2022": "windows2022@latest"}
KUBELET_CASES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "maxPods": {"maxPods": 17},
    "podsPerCore": {"podsPerCore": 3},
    "systemReserved": {"systemReserved": {"cpu": "150m", "memory": "300Mi", "ephemeral-storage": "2Gi"}},
    "kubeReserved": {"kubeReserved": {"cpu": "250m", "memory": "1Gi", "ephemeral-storage": "3Gi"}},
    "evictionHard-percent": {"evictionHard": {"memory.available": "5%", "nodefs.available": "15%"}},
    "evictionHard-absolute": {"evictionHard": {"memory.available": "500Mi", "nodefs.available": "2Gi"}},
    "evictionSoft": {"evictionSoft": {"memory.available": "10%", "nodefs.available": "20%"},
                     "evictionSoftGracePeriod": {"memory.available": "1m30s", "nodefs.available": "2m"}},
    "evictionMaxPodGracePeriod": {"evictionMaxPodGracePeriod": 60},
    "imageGC": {"imageGCHighThresholdPercent": 85, "imageGCLowThresholdPercent": 60},
    "cpuCFSQuota": {"cpuCFSQuota": False},
    "clusterDNS": {"clusterDNS": ["10.100.0.53"]},
    "everything": {
        "maxPods": 40, "systemReserved": {"cpu": "100m", "memory": "200Mi"},
        "kubeReserved": {"memory": "700Mi"}, "evictionHard": {"memory.available": "3%"},
        "evictionSoft": {"memory.available": "6%"}, "evictionSoftGracePeriod": {"memory.available": "45s"},
        "evictionMaxPodGracePeriod": 30, "imageGCHighThresholdPercent": 90, "imageGCLowThresholdPercent": 70,
        "cpuCFSQuota": True,
    },
}


def nodeclass(family: str, kubelet: dict[str, Any], **spec: Any) -> dict[str, Any]:
    body = {"amiSelectorTerms": [{"alias": FAMILY_ALIASES[family]}], "kubelet": kubelet, **spec}
    return {"metadata": {"name": "nc"}, "spec": body}


def render_for(manifest: dict[str, Any], type_name: str) -> tuple[str, Any]:
    """(user data, the type's modelled InstanceType) for ``manifest`` on ``type_name``, through the launch path."""
    shape = NodeClassShape.of_manifest(manifest)
    instance_type = shape.build(INFOS[type_name], (), region="us-east-1")
    assert instance_type is not None
    resolved = ResolvedNodeClass("nc", manifest["spec"], shape.family, shape.kubelet, {},
                                 security_groups=[SecurityGroup("sg-1", "nodes")])
    launcher = Launcher(None, None, CLUSTER, None, None, lambda: None)  # type: ignore[arg-type]
    request = LaunchRequest(nodeclaim="c", nodepool="p", nodeclass="nc", instance_types=[type_name])
    max_pods = instance_type.capacity.amount(PODS) // 1000
    spec = launcher.template_spec(request, resolved, "on-demand", "ami-1", max_pods, 0, {})
    return spec.user_data, instance_type


def cases() -> list[tuple[str, str, str]]:
    result = []
    for family in FAMILY_ALIASES:
        for case in KUBELET_CASES:
            if family == "Bottlerocket" and case == "podsPerCore":
                continue  # refused for Bottlerocket (test below)
            for type_name in TYPES:
                if family.startswith("Windows") and INFOS[type_name].arch != "amd64":
                    continue
                result.append((family, case, type_name))
    return result


@pytest.mark.parametrize(("family", "case", "type_name"), cases())
def test_every_kubelet_field_reaches_the_node_and_matches_the_allocatable_model(
    family: str, case: str, type_name: str
) -> None:
    kubelet = KUBELET_CASES[case]
    manifest = nodeclass(family, kubelet)
    assert unsupported_settings(FAMILIES[family], manifest["spec"]) == []
    text, modelled = render_for(manifest, type_name)
    node = kubelet_config(family, text)

    # Every field set reaches the node with its value; max pods and cluster DNS are always told.
    expected = dict(kubelet)
    expected["maxPods"] = modelled.capacity.amount(PODS) // 1000
    expected.setdefault("clusterDNS", [CLUSTER.dns_ip])
    told = {k: v for k, v in node.items() if not k.startswith("_")}
    assert {k: told.get(k) for k in expected} == expected
    assert not set(told) - set(expected) - {"registerWithTaints"}, "the node is told more than the class set"

    # The node's pods and its reserved + eviction figures are what the model schedules with.
    info = INFOS[type_name]
    assert node_pods(told, info) == modelled.capacity.amount(PODS) // 1000
    reserved = node_overhead(family, info, told, modelled.capacity.amount(MEMORY),
                             modelled.capacity.amount(EPHEMERAL_STORAGE))
    for resource in (CPU, MEMORY, EPHEMERAL_STORAGE):
        assert reserved[resource] == modelled.overhead.amount(resource), (resource, reserved, dict(modelled.overhead))


@pytest.mark.parametrize("family", ["AL2", "AL2023", "Bottlerocket"])
def test_raid0_assembles_the_instance_store_the_model_counts(family: str) -> None:
    manifest = nodeclass(family, {}, instanceStorePolicy="RAID0")
    text, modelled = render_for(manifest, "m5d.2xlarge")
    assert modelled.capacity.amount(EPHEMERAL_STORAGE) == INFOS["m5d.2xlarge"].local_nvme_gb * 10**9 * 1000
    if family == "AL2":
        words, _ = al2_bootstrap(text)
        assert words[-2:] == ["--local-disks", "raid0"]
    elif family == "AL2023":
        assert kubelet_config(family, text)["_spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}
    else:
        command = bottlerocket_settings(text)["_settings"]["bootstrap-commands"]["000-mount-instance-storage"]
        # bottlerocket@latest binds the default directories (1.46.0 and later)
        assert command == {"commands": [["apiclient", "ephemeral-storage", "init"],
                                        ["apiclient", "ephemeral-storage", "bind"]],
                           "mode": "always", "essential": True}
    without, _ = render_for(nodeclass(family, {}), "m5d.2xlarge")
    assert "raid0" not in without.lower()


def test_bottlerocket_before_1_46_binds_the_kubelet_directories_by_name() -> None:
    manifest = nodeclass("Bottlerocket", {}, instanceStorePolicy="RAID0",
                         amiSelectorTerms=[{"alias": "bottlerocket@v1.40.0"}])
    text, _ = render_for(manifest, "m5d.2xlarge")
    commands = bottlerocket_settings(text)["_settings"]["bootstrap-commands"]["000-mount-instance-storage"]["commands"]
    assert commands[1] == ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd",
                           "/var/lib/kubelet", "/var/log/pods"]


@pytest.mark.parametrize(
    ("family", "spec", "message"),
    [
        ("AL2", {"kubelet": {"registryPullQPS": 10, "maxPods": 20}}, "AL2 AMI family that would be silently "
         "dropped: registryPullQPS"),
        ("Windows2022", {"kubelet": {"serializeImagePulls": False}}, "dropped: serializeImagePulls"),
        ("Bottlerocket", {"kubelet": {"podsPerCore": 4}}, "Bottlerocket AMI family that would be silently "
         "dropped: podsPerCore"),
        ("AL2", {"kubelet": {"clusterDNS": ["10.0.0.10", "10.0.0.11"]}}, "doesn't accept multiple entries"),
        ("Windows2022", {"instanceStorePolicy": "RAID0"}, "RAID0 is not supported by the Windows2022 AMI family"),
    ],
)
def test_settings_a_family_would_drop_are_refused(family: str, spec: dict[str, Any], message: str) -> None:
    problems = unsupported_settings(FAMILIES[family], spec)
    assert len(problems) == 1 and message in problems[0]


def test_al2023_passes_any_kubelet_field_through_nodeadm() -> None:
    kubelet = {"registryPullQPS": 10, "serializeImagePulls": False, "clusterDNS": ["10.0.0.10", "10.0.0.11"]}
    manifest = nodeclass("AL2023", kubelet)
    assert unsupported_settings(FAMILIES["AL2023"], manifest["spec"]) == []
    config = kubelet_config("AL2023", render_for(manifest, "m5.large")[0])
    assert {k: config[k] for k in kubelet} == kubelet
