"""Bootstrap user data per AMI family, merged with the NodeClass's own ``userData``.

- AL2: MIME multi-part; the user's part(s) first, then ``/etc/eks/bootstrap.sh``.
- AL2023: MIME multi-part; the user's part(s) first, then a nodeadm ``NodeConfig``.
- Bottlerocket: TOML; the user's settings with the cluster settings, labels and
  taints laid over them.
- Windows: the user's PowerShell followed by ``Start-EKSBootstrap.ps1``.
- Custom: the user's data exactly as given.

Node labels and taints are passed to the kubelet so a node registers with them;
the ``karpenter.sh/unregistered:NoExecute`` taint is always added (core removes
it once the Node is matched to its NodeClaim).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from reconciler.cloud.aws.amifamily import AMIFamily
from reconciler.model import labels as wk

MIME_BOUNDARY = "//"
_KUBELET_ALLOWED_DOMAINS = ("kubelet.kubernetes.io", "node.kubernetes.io")
_KUBELET_ALLOWED_KEYS = frozenset(
    {wk.HOSTNAME, wk.ZONE, wk.REGION, wk.INSTANCE_TYPE, wk.ARCH, wk.OS, *wk.NORMALIZED_LABELS}
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


@dataclass(slots=True, frozen=True)
class BootstrapOptions:
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, Any]] = ()
    max_pods: int | None = None
    kubelet: Mapping[str, Any] = field(default_factory=dict)  # spec.kubelet, passed through
    custom: str | None = None  # spec.userData


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


def _taints(options: BootstrapOptions) -> list[Mapping[str, Any]]:
    taints = list(options.taints)
    if not any(t.get("key") == wk.UNREGISTERED_TAINT_KEY for t in taints):
        taints.append({"key": wk.UNREGISTERED_TAINT_KEY, "effect": "NoExecute"})
    return taints


def _taint_flag(taint: Mapping[str, Any]) -> str:
    return f"{taint['key']}={taint.get('value', '')}:{taint['effect']}"


def _kubelet_args(options: BootstrapOptions) -> str:
    args = []
    labels = kubelet_labels(options.labels)
    if labels:
        args.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in labels.items()))
    args.append("--register-with-taints=" + ",".join(_taint_flag(t) for t in _taints(options)))
    if options.max_pods is not None:
        args.append(f"--max-pods={options.max_pods}")
    return " ".join(args)


def render(family: AMIFamily, cluster: ClusterInfo, options: BootstrapOptions) -> str:
    """Plain-text user data (the launch template stores it base64-encoded)."""
    if family.name == "Custom":
        return options.custom or ""
    if family.name == "AL2":
        return _mime([*_user_parts(options.custom), ("text/x-shellscript", _al2_script(cluster, options))])
    if family.name == "AL2023":
        return _mime(
            [*_user_parts(options.custom), ("application/node.eks.aws", _al2023_nodeconfig(cluster, options))]
        )
    if family.name == "Bottlerocket":
        return _bottlerocket(cluster, options)
    if family.os == "windows":
        return _windows(cluster, options)
    raise UserDataError(f"no user data renderer for AMI family {family.name}")


def _al2_script(cluster: ClusterInfo, options: BootstrapOptions) -> str:
    lines = [
        "#!/bin/bash -xe",
        "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1",
        f"/etc/eks/bootstrap.sh '{cluster.name}' --apiserver-endpoint '{cluster.endpoint}' "
        f"--b64-cluster-ca '{cluster.ca_bundle}' \\",
    ]
    if cluster.dns_ip:
        lines.append(f"--dns-cluster-ip '{cluster.dns_ip}' \\")
    if options.max_pods is not None:
        lines.append("--use-max-pods false \\")
    lines.append(f"--kubelet-extra-args '{_kubelet_args(options)}'")
    return "\n".join(lines) + "\n"


def _al2023_nodeconfig(cluster: ClusterInfo, options: BootstrapOptions) -> str:
    config: dict[str, Any] = {
        key: value
        for key, value in (options.kubelet or {}).items()
        if key
        in (
            "kubeReserved",
            "systemReserved",
            "evictionHard",
            "evictionSoft",
            "evictionSoftGracePeriod",
            "evictionMaxPodGracePeriod",
            "imageGCHighThresholdPercent",
            "imageGCLowThresholdPercent",
            "cpuCFSQuota",
            "podsPerCore",
        )
    }
    if options.max_pods is not None:
        config["maxPods"] = options.max_pods
    if cluster.dns_ip:
        config["clusterDNS"] = [cluster.dns_ip]
    flags = []
    labels = kubelet_labels(options.labels)
    if labels:
        flags.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in labels.items()))
    flags.append("--register-with-taints=" + ",".join(_taint_flag(t) for t in _taints(options)))
    document = {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {
            "cluster": {
                "name": cluster.name,
                "apiServerEndpoint": cluster.endpoint,
                "certificateAuthority": cluster.ca_bundle,
                "cidr": cluster.service_cidr,
            },
            "kubelet": {"config": config, "flags": flags},
        },
    }
    return yaml.safe_dump(document, sort_keys=True)


def _user_parts(custom: str | None) -> list[tuple[str, str]]:
    """The user's data as MIME parts: its own parts if it is MIME, else one part of a guessed type."""
    if not custom or not custom.strip():
        return []
    text = custom.strip()
    if text.startswith("MIME-Version") or "Content-Type: multipart/mixed" in text.split("\n\n", 1)[0]:
        return _split_mime(text)
    if text.startswith("apiVersion") or "kind: NodeConfig" in text:
        return [("application/node.eks.aws", text + "\n")]
    return [("text/x-shellscript", text + "\n")]


def _split_mime(text: str) -> list[tuple[str, str]]:
    header, _, body = text.partition("\n\n")
    boundary = None
    for token in header.replace("\n", ";").split(";"):
        token = token.strip()
        if token.startswith("boundary="):
            boundary = token.split("=", 1)[1].strip('"')
    if not boundary:
        raise UserDataError("spec.userData: MIME user data has no boundary")
    parts = []
    for chunk in body.split(f"--{boundary}"):
        chunk = chunk.strip("\n")
        if not chunk or chunk.startswith("--"):
            continue
        part_header, _, part_body = chunk.partition("\n\n")
        content_type = "text/x-shellscript"
        for line in part_header.splitlines():
            if line.lower().startswith("content-type:"):
                content_type = line.split(":", 1)[1].split(";")[0].strip()
        parts.append((content_type, part_body.rstrip("\n") + "\n"))
    return parts


def _mime(parts: Sequence[tuple[str, str]]) -> str:
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"', ""]
    for content_type, body in parts:
        lines += [
            f"--{MIME_BOUNDARY}",
            f'Content-Type: {content_type}; charset="us-ascii"',
            "",
            body.rstrip("\n"),
        ]
    lines.append(f"--{MIME_BOUNDARY}--")
    return "\n".join(lines) + "\n"


def _bottlerocket(cluster: ClusterInfo, options: BootstrapOptions) -> str:
    try:
        settings = tomllib.loads(options.custom or "")
    except tomllib.TOMLDecodeError as err:
        raise UserDataError(f"spec.userData: not valid Bottlerocket TOML: {err}") from None
    kubernetes = settings.setdefault("settings", {}).setdefault("kubernetes", {})
    kubernetes.update(
        {
            "api-server": cluster.endpoint,
            "cluster-certificate": cluster.ca_bundle,
            "cluster-name": cluster.name,
        }
    )
    if cluster.dns_ip:
        kubernetes["cluster-dns-ip"] = cluster.dns_ip
    if options.max_pods is not None:
        kubernetes["max-pods"] = options.max_pods
    labels = kubernetes.setdefault("node-labels", {})
    labels.update(kubelet_labels(options.labels))
    taints = kubernetes.setdefault("node-taints", {})
    for taint in _taints(options):
        value = f"{taint.get('value', '')}:{taint['effect']}"
        existing = taints.setdefault(taint["key"], [])
        if value not in existing:
            existing.append(value)
    return dump_toml(settings)


def _windows(cluster: ClusterInfo, options: BootstrapOptions) -> str:
    custom = (options.custom or "").replace("<powershell>", "").replace("</powershell>", "").strip()
    lines = ["<powershell>"]
    if custom:
        lines.append(custom)
    lines += [
        '[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"',
        f"& $EKSBootstrapScriptFile -EKSClusterName '{cluster.name}' -APIServerEndpoint '{cluster.endpoint}' "
        f"-Base64ClusterCA '{cluster.ca_bundle}' -KubeletExtraArgs '{_kubelet_args(options)}'"
        + (f" -DNSClusterIP '{cluster.dns_ip}'" if cluster.dns_ip else ""),
        "</powershell>",
    ]
    return "\n".join(lines) + "\n"


def dump_toml(document: Mapping[str, Any], prefix: str = "") -> str:
    """A minimal TOML writer for Bottlerocket settings (tables, strings, numbers, booleans, lists)."""
    scalars, tables = [], []
    for key, value in document.items():
        quoted = _toml_key(key)
        if isinstance(value, Mapping):
            tables.append((quoted, value))
        else:
            scalars.append(f"{quoted} = {_toml_value(value)}")
    out = []
    if scalars:
        if prefix:
            out.append(f"[{prefix}]")
        out.extend(scalars)
        out.append("")
    for key, value in tables:
        out.append(dump_toml(value, f"{prefix}.{key}" if prefix else key))
    return "\n".join(line for line in out if line is not None)


def _toml_key(key: str) -> str:
    bare = all(c.isalnum() or c in "-_" for c in key) and key
    return key if bare else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))
