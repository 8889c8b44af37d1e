"""What an EKS node's bootstrap makes of its EC2 user data: the kubelet's labels, taints and config.

Read the way the node reads it, independently of how ``reconciler.cloud.aws.userdata`` writes it:

- AL2023: MIME multi-part; every ``application/node.eks.aws`` part is a nodeadm ``NodeConfig`` (later parts
  merge over earlier ones, flags accumulate); ``spec.kubelet.flags`` carries ``--node-labels`` and
  ``--register-with-taints``, ``spec.kubelet.config`` the KubeletConfiguration fields (maxPods, kubeReserved,
  registerWithTaints...).
- AL2: a shell part calling ``/etc/eks/bootstrap.sh ... --kubelet-extra-args '<flags>'``.
- Bottlerocket: TOML ``[settings.kubernetes]`` ``node-labels`` / ``node-taints`` / ``max-pods``.
"""

from __future__ import annotations

import email
import email.policy
import shlex
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml


class BootstrapError(ValueError):
    """User data a node could not boot from; the message says what is wrong."""


@dataclass(slots=True)
class KubeletRegistration:
    family: str  # AL2023 | AL2 | Bottlerocket
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # KubeletConfiguration fields (camelCase)


def read_user_data(text: str) -> KubeletRegistration:
    stripped = text.lstrip()
    if stripped.startswith("MIME-Version") or stripped.startswith("Content-Type"):
        return _from_mime(text)
    if "[settings" in text:
        return _from_bottlerocket(text)
    if "/etc/eks/bootstrap.sh" in text:
        return _from_al2_script(text, KubeletRegistration("AL2"))
    raise BootstrapError("user data is neither MIME (AL2/AL2023), Bottlerocket TOML nor a bootstrap.sh script")


def _from_mime(text: str) -> KubeletRegistration:
    message = email.message_from_string(text, policy=email.policy.compat32)
    parts = [p for p in message.walk() if not p.is_multipart()]
    configs = [p for p in parts if p.get_content_type() == "application/node.eks.aws"]
    if configs:
        registration = KubeletRegistration("AL2023")
        for part in configs:
            _merge_nodeconfig(registration, _payload(part))
        return registration
    for part in parts:
        if "/etc/eks/bootstrap.sh" in _payload(part):
            return _from_al2_script(_payload(part), KubeletRegistration("AL2"))
    raise BootstrapError("MIME user data has no NodeConfig part and no bootstrap.sh call")


def _payload(part: Any) -> str:
    raw = part.get_payload(decode=True)
    return raw.decode() if isinstance(raw, bytes) else str(part.get_payload())


def _merge_nodeconfig(registration: KubeletRegistration, document: str) -> None:
    try:
        config = yaml.safe_load(document) or {}
    except yaml.YAMLError as err:
        raise BootstrapError(f"NodeConfig is not YAML: {err}") from None
    if config.get("kind") != "NodeConfig":
        raise BootstrapError(f"application/node.eks.aws part is a {config.get('kind')!r}, not a NodeConfig")
    kubelet = (config.get("spec") or {}).get("kubelet") or {}
    registration.config.update(kubelet.get("config") or {})
    # KubeletConfiguration's registerWithTaints is the config-file form of --register-with-taints; a later
    # NodeConfig part replaces an earlier one's list, as nodeadm's merge does.
    if "registerWithTaints" in (kubelet.get("config") or {}):
        registration.taints = [
            {name: str(taint[name]) for name in ("key", "value", "effect") if taint.get(name)}
            for taint in registration.config["registerWithTaints"] or []
        ]
    # nodeadm hands the flags to the kubelet through systemd, which splits and unquotes them as a shell
    # would: Karpenter's ``--node-labels="k=v,..."`` reaches the kubelet without its quotes.
    _apply_flags(registration, [word for flag in kubelet.get("flags") or [] for word in shlex.split(str(flag))])


def _from_al2_script(script: str, registration: KubeletRegistration) -> KubeletRegistration:
    joined = script.replace("\\\n", " ")
    for line in joined.splitlines():
        if "/etc/eks/bootstrap.sh" not in line:
            continue
        words = shlex.split(line)
        for index, word in enumerate(words):
            if word == "--kubelet-extra-args" and index + 1 < len(words):
                _apply_flags(registration, shlex.split(words[index + 1]))
            elif word.startswith("--kubelet-extra-args="):
                _apply_flags(registration, shlex.split(word.split("=", 1)[1]))
        return registration
    raise BootstrapError("no /etc/eks/bootstrap.sh call in the AL2 user data")


def _apply_flags(registration: KubeletRegistration, flags: Iterable[str]) -> None:
    for flag in flags:
        name, _, value = flag.partition("=")
        if name == "--node-labels":
            registration.labels.update(_labels(value))
        elif name == "--register-with-taints":
            registration.taints += [_taint(spec) for spec in value.split(",") if spec]
        elif name == "--max-pods":
            registration.config["maxPods"] = int(value)


def _labels(value: str) -> dict[str, str]:
    labels = {}
    for pair in value.split(","):
        if not pair:
            continue
        key, sep, label_value = pair.partition("=")
        if not sep:
            raise BootstrapError(f"--node-labels entry {pair!r} is not key=value")
        labels[key] = label_value
    return labels


def _taint(spec: str) -> dict[str, str]:
    """``key[=value]:Effect`` as the kubelet parses ``--register-with-taints``."""
    key_value, sep, effect = spec.rpartition(":")
    if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise BootstrapError(f"--register-with-taints entry {spec!r} is not key[=value]:Effect")
    key, _, value = key_value.partition("=")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def _from_bottlerocket(text: str) -> KubeletRegistration:
    try:
        settings = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise BootstrapError(f"Bottlerocket user data is not TOML: {err}") from None
    kubernetes: Mapping[str, Any] = (settings.get("settings") or {}).get("kubernetes") or {}
    registration = KubeletRegistration("Bottlerocket")
    registration.labels = {str(k): str(v) for k, v in (kubernetes.get("node-labels") or {}).items()}
    for key, values in (kubernetes.get("node-taints") or {}).items():
        for entry in values if isinstance(values, list) else [values]:
            value, _, effect = str(entry).rpartition(":")
            taint = {"key": str(key), "effect": effect}
            if value:
                taint["value"] = value
            registration.taints.append(taint)
    if "max-pods" in kubernetes:
        registration.config["maxPods"] = int(kubernetes["max-pods"])
    for toml_key, config_key in (("kube-reserved", "kubeReserved"), ("system-reserved", "systemReserved"),
                                 ("eviction-hard", "evictionHard")):
        if toml_key in kubernetes:
            registration.config[config_key] = dict(kubernetes[toml_key])
    return registration
