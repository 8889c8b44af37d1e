"""Reconciler settings, read from environment variables with Karpenter's names.

The simulator builds the same ``Settings`` from a scenario's ``settings:`` map
(camelCase keys such as ``batchIdleDuration``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.api.support import FEATURE_GATES
from reconciler.model import durations

# Karpenter's gates and their defaults (v1.14); which of them Adze implements is ``reconciler.api.support``.
DEFAULT_FEATURE_GATES: dict[str, bool] = {name: gate.upstream_default for name, gate in FEATURE_GATES.items()}

# REBALANCE_HANDLING: "event" only records a Kubernetes event for a spot rebalance recommendation (Karpenter's
# behaviour); "drain" cordons the node and deletes its NodeClaim so it drains while a replacement comes up.
REBALANCE_HANDLING_MODES = ("event", "drain")


class SettingsError(ValueError):
    """A setting with a bad value; the message names the setting."""


LOG_LEVELS = ("debug", "info", "warning", "warn", "error")
_CLUSTER_NAME = re.compile(r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}")
# Partition-agnostic shape of a region name: us-east-1, eu-central-2, us-gov-west-1, cn-north-1, ap-southeast-7.
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")


def _parse_bool(text: str, name: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise SettingsError(f"{name}: {text!r} must be true or false")


def _parse_positive(text: str, name: str, kind: type[float] | type[int]) -> float:
    """A positive number (``kind`` int: a whole one), bounded so a typo cannot ask for an absurd rate."""
    try:
        value = kind(text.strip())
    except ValueError:
        raise SettingsError(f"{name}: {text!r} is not a {'whole ' if kind is int else ''}number") from None
    if not 0 < value <= 1_000_000:
        raise SettingsError(f"{name}: {text!r} must be between 0 (excluded) and 1000000")
    return value


def parse_duration(text: str, *, name: str = "duration") -> float:
    """A duration setting in seconds, read by the one Go duration parser (``reconciler.model.durations``).

    Surrounding spaces are ignored and negative values refused (no setting is a negative length of time);
    errors are ``SettingsError`` naming the setting.
    """
    try:
        return durations.parse_length(str(text).strip())
    except durations.DurationError as err:
        raise SettingsError(f"{name}: {err}") from None


def parse_feature_gates(text: str | Mapping[str, Any], *, name: str = "FEATURE_GATES") -> dict[str, bool]:
    from reconciler.api.support_check import gate_refusal

    gates = dict(DEFAULT_FEATURE_GATES)
    items: list[tuple[str, Any]]
    if isinstance(text, Mapping):
        items = list(text.items())
    else:
        items = []
        for part in filter(None, (p.strip() for p in str(text).split(","))):
            key, sep, value = part.partition("=")
            if not sep:
                raise SettingsError(f"{name}: {part!r} must look like Gate=true")
            items.append((key.strip(), value.strip()))
    for key, value in items:
        if key not in DEFAULT_FEATURE_GATES:
            raise SettingsError(f"{name}: unknown feature gate {key!r} (known: {', '.join(DEFAULT_FEATURE_GATES)})")
        if isinstance(value, bool):
            gates[key] = value
        elif str(value).lower() in ("true", "false"):
            gates[key] = str(value).lower() == "true"
        else:
            raise SettingsError(f"{name}.{key}: {value!r} is not true or false")
        refusal = gate_refusal(key, gates[key])
        if refusal:  # a gate Adze does not implement, turned on: refused by name, never accepted and ignored
            raise SettingsError(f"{name}: {refusal}")
    return gates


@dataclass(slots=True, frozen=True)
class Settings:
    cluster_name: str = ""
    cluster_endpoint: str = ""
    interruption_queue: str = ""
    aws_region: str = ""
    batch_idle_duration: float = 1.0
    batch_max_duration: float = 10.0
    preference_policy: str = "Respect"
    min_values_policy: str = "Strict"
    # A NodePool whose EC2NodeClass does not exist launches nothing (Karpenter: not Ready). Off in plain
    # scenarios, where the format lets a pool work without one; on for plans of real cluster snapshots.
    require_nodeclass: bool = False
    feature_gates: Mapping[str, bool] = field(default_factory=lambda: dict(DEFAULT_FEATURE_GATES))
    # Karpenter waits 15 s before executing a consolidation command and re-validates it.
    consolidation_validation_wait: float = 15.0
    disruption_poll_period: float = 10.0
    max_instance_types: int = 600
    log_level: str = "info"
    metrics_port: int = 8080
    health_probe_port: int = 8081
    leader_elect: bool = True
    rebalance_handling: str = "event"  # one of REBALANCE_HANDLING_MODES
    # Client-side rate limit of API-server calls (Karpenter's KUBE_CLIENT_QPS / KUBE_CLIENT_BURST).
    kube_client_qps: float = 200.0
    kube_client_burst: int = 300
    # A watch that delivers nothing (no event, no bookmark) this long is closed and its kind re-listed
    # (WATCH_PROGRESS_DEADLINE; twice the API server's one-minute bookmark interval).
    watch_progress_deadline: float = 120.0

    def gate(self, name: str) -> bool:
        return bool(self.feature_gates.get(name, False))

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Karpenter's environment variable names; bad values raise ``SettingsError`` naming the variable, and so
        does a setting given a value Adze does not honour (``reconciler.api.support``)."""
        from reconciler.api.support_check import environment_check

        refusal, _ = environment_check(env)
        if refusal:
            raise SettingsError(refusal)
        values: dict[str, Any] = {}
        text_settings = {
            "CLUSTER_NAME": "cluster_name",
            "CLUSTER_ENDPOINT": "cluster_endpoint",
            "INTERRUPTION_QUEUE": "interruption_queue",
            "LOG_LEVEL": "log_level",
        }
        for var, attr in text_settings.items():
            if env.get(var):
                values[attr] = env[var]
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if region:
            values["aws_region"] = region
        for var, attr in (("BATCH_IDLE_DURATION", "batch_idle_duration"), ("BATCH_MAX_DURATION", "batch_max_duration")):
            if env.get(var):
                values[attr] = parse_duration(env[var], name=var)
        for var, attr, allowed in (
            ("PREFERENCE_POLICY", "preference_policy", ("Respect", "Ignore")),
            ("MIN_VALUES_POLICY", "min_values_policy", ("Strict", "BestEffort")),
            ("REBALANCE_HANDLING", "rebalance_handling", REBALANCE_HANDLING_MODES),
        ):
            if env.get(var):
                if env[var] not in allowed:
                    raise SettingsError(f"{var}: {env[var]!r} must be one of {', '.join(allowed)}")
                values[attr] = env[var]
        if env.get("FEATURE_GATES"):
            values["feature_gates"] = parse_feature_gates(env["FEATURE_GATES"])
        for var, attr in (("METRICS_PORT", "metrics_port"), ("HEALTH_PROBE_PORT", "health_probe_port")):
            if env.get(var):
                text = env[var].strip()
                if not text.isdigit() or not 0 <= int(text) <= 65535:
                    raise SettingsError(f"{var}: {env[var]!r} is not a port number (0-65535)")
                values[attr] = int(text)
        if env.get("KUBE_CLIENT_QPS"):
            values["kube_client_qps"] = _parse_positive(env["KUBE_CLIENT_QPS"], "KUBE_CLIENT_QPS", float)
        if env.get("KUBE_CLIENT_BURST"):
            values["kube_client_burst"] = int(_parse_positive(env["KUBE_CLIENT_BURST"], "KUBE_CLIENT_BURST", int))
        if env.get("WATCH_PROGRESS_DEADLINE"):
            deadline = parse_duration(env["WATCH_PROGRESS_DEADLINE"], name="WATCH_PROGRESS_DEADLINE")
            if deadline <= 0:
                raise SettingsError(f"WATCH_PROGRESS_DEADLINE: {env['WATCH_PROGRESS_DEADLINE']!r} must be positive")
            values["watch_progress_deadline"] = deadline
        if env.get("DISABLE_LEADER_ELECTION"):
            values["leader_elect"] = not _parse_bool(env["DISABLE_LEADER_ELECTION"], "DISABLE_LEADER_ELECTION")
        settings = cls(**values)
        settings.validate(env_names=True)
        settings.validate_runtime()
        return settings

    @classmethod
    def from_scenario(cls, raw: Mapping[str, Any] | None, *, path: str = "settings") -> Settings:
        """The ``settings:`` block of a scenario file (camelCase keys)."""
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise SettingsError(f"{path}: expected a map")
        values: dict[str, Any] = {}
        for key, value in raw.items():
            where = f"{path}.{key}"
            if key in ("batchIdleDuration", "batchMaxDuration", "consolidationValidationWait"):
                attr = {"batchIdleDuration": "batch_idle_duration", "batchMaxDuration": "batch_max_duration",
                        "consolidationValidationWait": "consolidation_validation_wait"}[key]
                values[attr] = parse_duration(str(value), name=where)
            elif key == "preferencePolicy":
                if value not in ("Respect", "Ignore"):
                    raise SettingsError(f"{where}: {value!r} must be Respect or Ignore")
                values["preference_policy"] = value
            elif key == "minValuesPolicy":
                if value not in ("Strict", "BestEffort"):
                    raise SettingsError(f"{where}: {value!r} must be Strict or BestEffort")
                values["min_values_policy"] = value
            elif key == "featureGates":
                values["feature_gates"] = parse_feature_gates(value, name=where)
            elif key == "clusterName":
                values["cluster_name"] = str(value)
            elif key == "rebalanceHandling":
                if value not in REBALANCE_HANDLING_MODES:
                    raise SettingsError(f"{where}: {value!r} must be one of {', '.join(REBALANCE_HANDLING_MODES)}")
                values["rebalance_handling"] = value
            elif key == "clock":
                continue  # read by the simulator's clock, not a reconciler setting
            else:
                raise SettingsError(f"{where}: unknown setting")
        settings = cls(**values)
        settings.validate(prefix=f"{path}.")
        return settings

    def validate_runtime(self) -> None:
        """What only the live controller reads: names AWS and Kubernetes would refuse, log level, ports."""
        if self.log_level.lower() not in LOG_LEVELS:
            raise SettingsError(f"LOG_LEVEL: {self.log_level!r} must be one of {', '.join(LOG_LEVELS)}")
        if self.cluster_name and not _CLUSTER_NAME.fullmatch(self.cluster_name):
            raise SettingsError(
                f"CLUSTER_NAME: {self.cluster_name!r} is not an EKS cluster name "
                "(1-100 letters, digits, hyphens and underscores, starting with a letter or digit)"
            )
        if self.aws_region and not _REGION.fullmatch(self.aws_region):
            raise SettingsError(f"AWS_REGION: {self.aws_region!r} is not an AWS region name such as us-east-1")
        if self.metrics_port == self.health_probe_port and self.metrics_port != 0:
            raise SettingsError(
                f"METRICS_PORT and HEALTH_PROBE_PORT are both {self.metrics_port}: they need different ports"
            )

    def validate(self, prefix: str = "", *, env_names: bool = False) -> None:
        """Cross-field checks; messages name the variable (``env_names``) or the scenario key under ``prefix``."""
        idle, most = (("BATCH_IDLE_DURATION", "BATCH_MAX_DURATION") if env_names
                      else ("batchIdleDuration", "batchMaxDuration"))
        for name, value in ((idle, self.batch_idle_duration), (most, self.batch_max_duration)):
            if value <= 0:
                raise SettingsError(f"{prefix}{name}: must be positive")
        if self.batch_idle_duration > self.batch_max_duration:
            raise SettingsError(f"{prefix}{idle}: must not exceed {most}")
        if self.rebalance_handling not in REBALANCE_HANDLING_MODES:
            allowed = ", ".join(REBALANCE_HANDLING_MODES)
            raise SettingsError(f"{prefix}REBALANCE_HANDLING: {self.rebalance_handling!r} must be one of {allowed}")
