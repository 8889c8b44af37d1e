"""Bottlerocket user data: TOML ``settings``, the user's merged with what Karpenter sets.

The user's ``spec.userData`` is read as TOML; Karpenter then overwrites the
cluster settings, adds its node labels, replaces ``node-taints`` with the
NodeClaim's taints (a taint only in user data would be invisible to
scheduling), and writes each kubelet field under its Bottlerocket name in
``settings.kubernetes``. ``instanceStorePolicy: RAID0`` becomes a bootstrap
command that assembles the instance-store disks into the node's ephemeral storage
(``apiclient ephemeral-storage init`` + ``bind``; Bottlerocket before 1.46.0 needs the
directories named).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from datetime import date, datetime, time
from typing import Any

# spec.kubelet field -> Bottlerocket settings.kubernetes key (how upstream names them).
KUBELET_SETTINGS = {
    "systemReserved": "system-reserved",
    "kubeReserved": "kube-reserved",
    "evictionHard": "eviction-hard",
    "evictionSoft": "eviction-soft",
    "evictionSoftGracePeriod": "eviction-soft-grace-period",
    "evictionMaxPodGracePeriod": "eviction-max-pod-grace-period",
    "imageGCHighThresholdPercent": "image-gc-high-threshold-percent",
    "imageGCLowThresholdPercent": "image-gc-low-threshold-percent",
    "cpuCFSQuota": "cpu-cfs-quota-enforced",
}
# Bottlerocket models the image GC thresholds as strings.
_STRING_SETTINGS = frozenset({"image-gc-high-threshold-percent", "image-gc-low-threshold-percent"})
RAID0_COMMAND = "000-mount-instance-storage"
_DEFAULT_BIND_SINCE = (1, 46, 0)
_LEGACY_BIND_DIRS = ["--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"]
_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


class BottlerocketError(ValueError):
    pass


def load_settings(custom: str | None) -> dict[str, Any]:
    try:
        return tomllib.loads(custom or "")
    except tomllib.TOMLDecodeError as err:
        raise BottlerocketError(f"spec.userData: not valid Bottlerocket TOML: {err}") from None


def apply_kubelet(kubernetes: dict[str, Any], kubelet: Mapping[str, Any]) -> None:
    """Write each kubelet field Karpenter maps under its Bottlerocket key (podsPerCore has none)."""
    for field, key in KUBELET_SETTINGS.items():
        value = kubelet.get(field)
        if value is None:
            continue
        if isinstance(value, Mapping):
            value = {str(k): str(v) for k, v in sorted(value.items())}
        elif key in _STRING_SETTINGS:
            value = str(value)
        kubernetes[key] = value


def supports_default_bind(ami_version: str) -> bool:
    """Bottlerocket 1.46.0 and later bind the ephemeral storage to its default directories ("latest" is)."""
    if ami_version == "latest":
        return True
    match = _VERSION.search(ami_version or "")
    return match is not None and tuple(int(g) for g in match.groups()) >= _DEFAULT_BIND_SINCE


def raid0_bootstrap_command(ami_version: str) -> dict[str, Any]:
    bind = ["apiclient", "ephemeral-storage", "bind"]
    if not supports_default_bind(ami_version):
        bind += _LEGACY_BIND_DIRS
    return {
        "commands": [["apiclient", "ephemeral-storage", "init"], bind],
        "mode": "always",
        "essential": True,
    }


def dump_toml(document: Mapping[str, Any], prefix: str = "") -> str:
    """A minimal TOML writer for Bottlerocket settings (tables, strings, numbers, booleans, dates, lists)."""
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
    return "\n".join(out)


def _toml_key(key: str) -> str:
    bare = bool(key) and all(c.isalnum() or c in "-_" for c in key)
    return key if bare else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):  # inside a list: an inline table
        return "{" + ", ".join(f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value))
