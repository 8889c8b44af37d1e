"""Reading rendered user data back the way each AMI's bootstrap reads it, and the node it would make.

``kubelet_config(family, text)`` parses AL2's ``bootstrap.sh`` command line (MIME, shell words,
kubelet flags), Windows' ``Start-EKSBootstrap.ps1`` arguments, Bottlerocket's TOML settings and
AL2023's nodeadm ``NodeConfig`` (YAML) into one KubeletConfiguration-shaped dict, so tests can
compare what the node is told with what the NodeClass asked for.

``node_overhead`` is what that node reserves: each value the user data sets, else the AMI's own
default (the EKS AMIs' and Bottlerocket's kube-reserved ladder; the kubelet's hard eviction
defaults). It is written here from the AMI documentation, independently of
``reconciler.cloud.aws.allocatable``, which it is compared with.
"""

from __future__ import annotations

import email
import math
import re
import shlex
import tomllib
from typing import Any

import yaml

from reconciler.cloud.aws.catalog import InstanceTypeInfo
from reconciler.model.quantity import parse_quantity

MI = 2**20 * 1000  # milli-bytes
_BR_KEYS = {
    "max-pods": "maxPods",
    "cluster-dns-ip": "clusterDNS",
    "system-reserved": "systemReserved",
    "kube-reserved": "kubeReserved",
    "eviction-hard": "evictionHard",
    "eviction-soft": "evictionSoft",
    "eviction-soft-grace-period": "evictionSoftGracePeriod",
    "eviction-max-pod-grace-period": "evictionMaxPodGracePeriod",
    "image-gc-high-threshold-percent": "imageGCHighThresholdPercent",
    "image-gc-low-threshold-percent": "imageGCLowThresholdPercent",
    "cpu-cfs-quota-enforced": "cpuCFSQuota",
}
_FLAG_MAPS = {"--system-reserved": ("systemReserved", "="), "--kube-reserved": ("kubeReserved", "="),
              "--eviction-hard": ("evictionHard", "<"), "--eviction-soft": ("evictionSoft", "<"),
              "--eviction-soft-grace-period": ("evictionSoftGracePeriod", "=")}
_FLAG_INTS = {"--max-pods": "maxPods", "--pods-per-core": "podsPerCore",
              "--eviction-max-pod-grace-period": "evictionMaxPodGracePeriod",
              "--image-gc-high-threshold": "imageGCHighThresholdPercent",
              "--image-gc-low-threshold": "imageGCLowThresholdPercent"}


def mime_parts(text: str) -> list[tuple[str, str]]:
    """(content type, body) of every part of a MIME archive, as cloud-init splits it."""
    message = email.message_from_string(text)
    assert message.is_multipart(), text[:200]
    return [(part.get_content_type(), str(part.get_payload())) for part in message.get_payload()]


def kubelet_flags_to_config(flags: list[str]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for flag in flags:
        name, _, value = flag.partition("=")
        if name in _FLAG_MAPS:
            field, separator = _FLAG_MAPS[name]
            config[field] = dict(item.split(separator, 1) for item in value.split(","))
        elif name in _FLAG_INTS:
            config[_FLAG_INTS[name]] = int(value)
        elif name == "--cpu-cfs-quota":
            config["cpuCFSQuota"] = {"true": True, "false": False}[value]
        elif name == "--node-labels":
            config["_labels"] = dict(item.split("=", 1) for item in value.split(","))
        elif name == "--register-with-taints":
            config["_taints"] = value.split(",")
        else:
            raise AssertionError(f"unexpected kubelet flag {flag}")
    return config


def al2_bootstrap(text: str) -> tuple[list[str], dict[str, Any]]:
    """The bootstrap.sh arguments (shell words) of AL2 user data, and the kubelet config they give."""
    script = mime_parts(text)[-1][1]
    command = next(line for line in script.replace(" \\\n", " ").splitlines() if "/etc/eks/bootstrap.sh" in line)
    words = shlex.split(command)
    options: dict[str, str] = {}
    index = 2  # bootstrap.sh <cluster>
    while index < len(words):
        options[words[index]] = words[index + 1]
        index += 2
    config = kubelet_flags_to_config(shlex.split(options.get("--kubelet-extra-args", "")))
    if "--dns-cluster-ip" in options:
        config["clusterDNS"] = [options["--dns-cluster-ip"]]
    return words, config | {"_options": options}


def windows_bootstrap(text: str) -> dict[str, Any]:
    extra = re.search(r"-KubeletExtraArgs '([^']*)'", text)
    assert extra, text
    config = kubelet_flags_to_config(shlex.split(extra.group(1)))
    dns = re.search(r"-DNSClusterIP '([^']*)'", text)
    if dns:
        config["clusterDNS"] = [dns.group(1)]
    return config


def bottlerocket_settings(text: str) -> dict[str, Any]:
    settings = tomllib.loads(text)["settings"]
    kubernetes = settings["kubernetes"]
    config: dict[str, Any] = {}
    for key, field in _BR_KEYS.items():
        if key in kubernetes:
            value = kubernetes[key]
            if field == "clusterDNS":
                value = [value]
            elif key.startswith("image-gc"):
                value = int(value)  # Bottlerocket models these as strings
            config[field] = value
    return config | {"_settings": settings}


def nodeadm_config(text: str) -> dict[str, Any]:
    nodeconfig = yaml.safe_load(mime_parts(text)[-1][1])
    assert nodeconfig["kind"] == "NodeConfig"
    return dict(nodeconfig["spec"]["kubelet"]["config"]) | {"_spec": nodeconfig["spec"]}


def kubelet_config(family: str, text: str) -> dict[str, Any]:
    if family == "AL2":
        return al2_bootstrap(text)[1]
    if family == "AL2023":
        return nodeadm_config(text)
    if family == "Bottlerocket":
        return bottlerocket_settings(text)
    if family.startswith("Windows"):
        return windows_bootstrap(text)
    raise AssertionError(family)


def _cpu_ladder(vcpus: int) -> int:
    """EKS AMI kube-reserved CPU: 6 % of the first core, 1 % of the second, 0.5 % of the next two,
    0.25 % of the rest (millicores, each range rounded down)."""
    millicores = vcpus * 1000
    spans = ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, 10**9, 25))  # per 10,000
    return sum(max(0, min(millicores, end) - start) * share // 10000 for start, end, share in spans)


def _amount(value: str, capacity_milli: int) -> int:
    if str(value).endswith("%"):
        percent = float(str(value)[:-1])
        return 0 if percent == 100 else math.ceil(capacity_milli / 1000 * percent / 100) * 1000
    return parse_quantity(value)


def node_pods(config: dict[str, Any], info: InstanceTypeInfo) -> int:
    pods = int(config["maxPods"])
    if config.get("podsPerCore"):
        pods = min(pods, int(config["podsPerCore"]) * info.vcpus)  # the kubelet applies the smaller
    return pods


def node_overhead(family: str, info: InstanceTypeInfo, config: dict[str, Any], memory_milli: int,
                  storage_milli: int) -> dict[str, int]:
    """What the node holds back from its capacity: kube-reserved + system-reserved + hard eviction."""
    if family in ("AL2", "AL2023"):
        # bootstrap.sh / nodeadm size kube-reserved memory from the ENI max-pods table, not --max-pods.
        memory_pods = info.network_interfaces * (info.ipv4_per_interface - 1) + 2
    else:
        memory_pods = node_pods(config, info)
    kube = {"cpu": _cpu_ladder(info.vcpus), "memory": (11 * memory_pods + 255) * MI,
            "ephemeral-storage": parse_quantity("1Gi")}
    kube.update({k: parse_quantity(v) for k, v in (config.get("kubeReserved") or {}).items()})
    system = {k: parse_quantity(v) for k, v in (config.get("systemReserved") or {}).items()}
    hard = {"memory.available": "100Mi", "nodefs.available": "10%"} | dict(config.get("evictionHard") or {})
    eviction = {"memory": _amount(hard["memory.available"], memory_milli),
                "ephemeral-storage": _amount(hard["nodefs.available"], storage_milli)}
    total: dict[str, int] = {}
    for part in (kube, system, eviction):
        for name, amount in part.items():
            if name != "pid":
                total[name] = total.get(name, 0) + amount
    return total
