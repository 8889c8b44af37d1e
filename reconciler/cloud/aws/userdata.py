"""Bootstrap user data per AMI family, merged with the NodeClass's own ``userData``.

Every family receives the same kubelet settings (``spec.kubelet`` with max pods
resolved for the instance type and ``clusterDNS`` defaulted to the cluster's
kube-dns address), each in the form its bootstrap reads:

- AL2: MIME; the user's part(s), then ``/etc/eks/bootstrap.sh`` with
  ``--kubelet-extra-args`` carrying each kubelet field as a kubelet flag,
  ``--ip-family ipv6`` on IPv6 clusters and ``--local-disks raid0`` for RAID0;
- AL2023: MIME; the user's part(s), then a nodeadm ``NodeConfig`` whose inline
  kubelet config is the whole ``spec.kubelet`` map (nodeadm passes any field
  through) and ``instance.localStorage.strategy: RAID0`` for RAID0;
- Bottlerocket: TOML ``settings.kubernetes`` keys (``userdata_bottlerocket``);
- Windows: the user's PowerShell, then ``Start-EKSBootstrap.ps1`` with
  ``-KubeletExtraArgs`` (the same flags as AL2) and ``-DNSClusterIP``;
- Custom: the user's data exactly as given.

The families other than AL2023 apply only the fields Karpenter maps
(``amifamily.MANAGED_KUBELET_FIELDS``); the NodeClass validation refuses the
rest for them rather than let them be dropped here. Node labels and taints are
passed so a node registers with them; the ``karpenter.sh/unregistered:NoExecute``
taint is always added (core removes it once the Node is matched to its NodeClaim).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from reconciler.api.amifamily import AMIFamily
from reconciler.cloud.aws import userdata_bottlerocket as bottlerocket
from reconciler.cloud.aws import userdata_mime as mime
from reconciler.model import labels as wk

RAID0 = "RAID0"
# libyaml's safe dumper when built (same output, ~5x less CPU per launch template), else PyYAML's.
_YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_KUBELET_ALLOWED_DOMAINS = ("kubelet.kubernetes.io", "node.kubernetes.io")
_KUBELET_ALLOWED_KEYS = frozenset(
    {wk.HOSTNAME, wk.ZONE, wk.REGION, wk.INSTANCE_TYPE, wk.ARCH, wk.OS, *wk.NORMALIZED_LABELS}
)
# Kubelet flags for the map-valued fields: (spec.kubelet field, flag, separator between key and value).
_MAP_FLAGS = (
    ("systemReserved", "--system-reserved", "="),
    ("kubeReserved", "--kube-reserved", "="),
    ("evictionHard", "--eviction-hard", "<"),
    ("evictionSoft", "--eviction-soft", "<"),
    ("evictionSoftGracePeriod", "--eviction-soft-grace-period", "="),
)
_SCALAR_FLAGS = (
    ("evictionMaxPodGracePeriod", "--eviction-max-pod-grace-period"),
    ("imageGCHighThresholdPercent", "--image-gc-high-threshold"),
    ("imageGCLowThresholdPercent", "--image-gc-low-threshold"),
    ("cpuCFSQuota", "--cpu-cfs-quota"),
)


class UserDataError(ValueError):
    pass


@dataclass(slots=True, frozen=True)
class ClusterInfo:
    name: str
    endpoint: str
    ca_bundle: str  # base64 PEM, as EKS returns it
    dns_ip: str = ""
    service_cidr: str = "172.20.0.0/16"
    kubernetes_version: str = "1.32"

    @property
    def ipv6(self) -> bool:
        """An IPv6 cluster: its kube-dns Service has an IPv6 address (how Karpenter tells)."""
        return is_ipv6(self.dns_ip)


def is_ipv6(address: str) -> bool:
    try:
        return bool(address) and ipaddress.ip_address(address).version == 6
    except ValueError:
        return False


@dataclass(slots=True, frozen=True)
class BootstrapOptions:
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, Any]] = ()
    max_pods: int | None = None
    kubelet: Mapping[str, Any] = field(default_factory=dict)  # spec.kubelet, as stored
    custom: str | None = None  # spec.userData
    instance_store_policy: str | None = None  # spec.instanceStorePolicy
    ami_version: str = ""  # Bottlerocket release ("latest", "v1.46.0", ...): decides the RAID0 bind command


def kubelet_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Labels a kubelet may set on its own Node (NodeRestriction rejects other kubernetes.io keys)."""
    allowed = {}
    for key, value in labels.items():
        domain = key.split("/", 1)[0] if "/" in key else ""
        restricted = domain.endswith(("kubernetes.io", "k8s.io"))
        permitted = key in _KUBELET_ALLOWED_KEYS or any(
            domain == d or domain.endswith("." + d) for d in _KUBELET_ALLOWED_DOMAINS
        )
        if not restricted or permitted:
            allowed[key] = value
    return dict(sorted(allowed.items()))


def effective_kubelet(cluster: ClusterInfo, options: BootstrapOptions) -> dict[str, Any]:
    """``spec.kubelet`` as the node gets it: max pods resolved for the type, clusterDNS defaulted."""
    kubelet = dict(options.kubelet or {})
    if options.max_pods is not None:
        kubelet["maxPods"] = options.max_pods
    if not kubelet.get("clusterDNS") and cluster.dns_ip:
        kubelet["clusterDNS"] = [cluster.dns_ip]
    return kubelet


def taints(options: BootstrapOptions) -> list[Mapping[str, Any]]:
    """The NodeClaim's taints plus ``karpenter.sh/unregistered:NoExecute``."""
    result = list(options.taints)
    if not any(t.get("key") == wk.UNREGISTERED_TAINT_KEY for t in result):
        result.append({"key": wk.UNREGISTERED_TAINT_KEY, "effect": "NoExecute"})
    return result


def taint_string(taint: Mapping[str, Any]) -> str:
    """``key=value:Effect``, or ``key:Effect`` without a value (the kubelet's --register-with-taints form)."""
    value = taint.get("value") or ""
    return f"{taint['key']}={value}:{taint['effect']}" if value else f"{taint['key']}:{taint['effect']}"


def _labels_flag(options: BootstrapOptions) -> str | None:
    labels = kubelet_labels(options.labels)
    if not labels:
        return None
    return '--node-labels="' + ",".join(f"{k}={v}" for k, v in labels.items()) + '"'


def kubelet_flags(kubelet: Mapping[str, Any], options: BootstrapOptions) -> list[str]:
    """Kubelet command-line flags for AL2's ``--kubelet-extra-args`` and Windows' ``-KubeletExtraArgs``."""
    flags = [flag for flag in (_labels_flag(options),) if flag]
    flags.append('--register-with-taints="' + ",".join(taint_string(t) for t in taints(options)) + '"')
    if kubelet.get("maxPods") is not None:
        flags.append(f"--max-pods={kubelet['maxPods']}")
    if kubelet.get("podsPerCore") is not None:
        flags.append(f"--pods-per-core={kubelet['podsPerCore']}")
    for name, flag, separator in _MAP_FLAGS:
        values = kubelet.get(name) or {}
        if values:
            joined = ",".join(f"{k}{separator}{v}" for k, v in sorted(values.items()))
            flags.append(f'{flag}="{joined}"')
    for name, flag in _SCALAR_FLAGS:
        value = kubelet.get(name)
        if value is not None:
            flags.append(f"{flag}={str(value).lower() if isinstance(value, bool) else value}")
    return flags


def render(family: AMIFamily, cluster: ClusterInfo, options: BootstrapOptions) -> str:
    """Plain-text user data (the launch template stores it base64-encoded)."""
    try:
        if family.name == "Custom":
            return options.custom or ""
        if family.name == "AL2":
            return mime.archive([*mime.user_parts(options.custom), mime.Part.of(mime.SHELL_SCRIPT,
                                                                               _al2_script(cluster, options))])
        if family.name == "AL2023":
            return mime.archive([
                *mime.user_parts(options.custom, nodeconfig_yaml=True),
                mime.Part.of(mime.NODE_CONFIG, _al2023_nodeconfig(cluster, options)),
            ])
        if family.name == "Bottlerocket":
            return _bottlerocket(cluster, options)
        if family.os == "windows":
            return _windows(cluster, options)
    except (mime.MimeError, bottlerocket.BottlerocketError) as err:
        raise UserDataError(str(err)) from None
    raise UserDataError(f"no user data renderer for AMI family {family.name}")


def _al2_script(cluster: ClusterInfo, options: BootstrapOptions) -> str:
    kubelet = effective_kubelet(cluster, options)
    # bootstrap.sh takes its parameters with a space, never an equals sign.
    lines = [
        "#!/bin/bash -xe",
        "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1",
        f"/etc/eks/bootstrap.sh '{cluster.name}' --apiserver-endpoint '{cluster.endpoint}' "
        f"--b64-cluster-ca '{cluster.ca_bundle}'",
    ]
    dns = list(kubelet.get("clusterDNS") or [])
    if dns and is_ipv6(str(dns[0])):
        lines.append("--ip-family ipv6")
    if dns:
        lines.append(f"--dns-cluster-ip '{dns[0]}'")
    if kubelet.get("maxPods") is not None:
        lines.append("--use-max-pods false")
    lines.append(f"--kubelet-extra-args '{' '.join(kubelet_flags(kubelet, options))}'")
    if options.instance_store_policy == RAID0:
        lines.append("--local-disks raid0")
    header, command = lines[:2], lines[2:]
    return "\n".join([*header, " \\\n".join(command)]) + "\n"


def _al2023_nodeconfig(cluster: ClusterInfo, options: BootstrapOptions) -> str:
    config = effective_kubelet(cluster, options)
    config["registerWithTaints"] = [
        {k: v for k, v in (("key", t["key"]), ("value", t.get("value")), ("effect", t["effect"])) if v}
        for t in taints(options)
    ]
    kubelet: dict[str, Any] = {"config": config}
    labels = _labels_flag(options)
    if labels:
        kubelet["flags"] = [labels]
    spec: dict[str, Any] = {
        "cluster": {
            "name": cluster.name,
            "apiServerEndpoint": cluster.endpoint,
            "certificateAuthority": cluster.ca_bundle,
            "cidr": cluster.service_cidr,
        },
        "kubelet": kubelet,
    }
    if options.instance_store_policy == RAID0:
        spec["instance"] = {"localStorage": {"strategy": RAID0}}
    document = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}
    return "# Karpenter Generated NodeConfig\n" + yaml.dump(document, Dumper=_YAML_DUMPER, sort_keys=True)


def _bottlerocket(cluster: ClusterInfo, options: BootstrapOptions) -> str:
    document = bottlerocket.load_settings(options.custom)
    settings = document.setdefault("settings", {})
    kubernetes = settings.setdefault("kubernetes", {})
    kubelet = effective_kubelet(cluster, options)
    kubernetes.update({"api-server": cluster.endpoint, "cluster-certificate": cluster.ca_bundle,
                       "cluster-name": cluster.name})
    dns = list(kubelet.get("clusterDNS") or [])
    if dns:
        kubernetes["cluster-dns-ip"] = str(dns[0])
    if kubelet.get("maxPods") is not None:
        kubernetes["max-pods"] = int(kubelet["maxPods"])
    kubernetes.setdefault("node-labels", {}).update(kubelet_labels(options.labels))
    bottlerocket.apply_kubelet(kubernetes, kubelet)
    # Replaced, not merged: a taint only the user data knew would be invisible to scheduling.
    node_taints: dict[str, list[str]] = {}
    for taint in taints(options):
        node_taints.setdefault(str(taint["key"]), []).append(f"{taint.get('value') or ''}:{taint['effect']}")
    kubernetes["node-taints"] = node_taints
    if options.instance_store_policy == RAID0:
        commands = settings.setdefault("bootstrap-commands", {})
        commands[bottlerocket.RAID0_COMMAND] = bottlerocket.raid0_bootstrap_command(options.ami_version)
    return bottlerocket.dump_toml(document)


def _windows(cluster: ClusterInfo, options: BootstrapOptions) -> str:
    kubelet = effective_kubelet(cluster, options)
    custom = (options.custom or "").replace("<powershell>", "").replace("</powershell>", "").strip()
    command = (
        f"& $EKSBootstrapScriptFile -EKSClusterName '{cluster.name}' -APIServerEndpoint '{cluster.endpoint}' "
        f"-Base64ClusterCA '{cluster.ca_bundle}' -KubeletExtraArgs '{' '.join(kubelet_flags(kubelet, options))}'"
    )
    dns = list(kubelet.get("clusterDNS") or [])
    if dns:
        command += f" -DNSClusterIP '{dns[0]}'"
    lines = ["<powershell>", *([custom] if custom else []),
             '[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"',
             command, "</powershell>"]
    return "\n".join(lines) + "\n"


dump_toml = bottlerocket.dump_toml
