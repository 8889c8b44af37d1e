"""Checking objects, feature gates and settings against the support registry (``reconciler.api.support``).

- ``unsupported_fields(manifest, gates)``: what a NodePool, NodeClaim or EC2NodeClass sets that Adze does not
  implement (or implements only behind a gate that is off), as ``Finding``s the live controller turns into a
  condition, an event and a log line and ``plan``/``explain`` show as risks;
- ``gate_refusal(name, value)``: the one line that stops start-up for a gate Adze does not implement;
- ``environment_check(env)``: the one line that stops start-up for a setting given a value Adze does not
  honour, and the warnings for upstream defaults Adze does not act on;
- ``schema_paths(kind)``, ``entry_for(kind, path)``: the walk the registry test makes;
- ``support_matrix_markdown()``: the support matrix of ``docs/karpenter-compatibility.md``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.api.amifamily import UnknownAMIFamilyError, family_of_nodeclass, unsupported_settings
from reconciler.api.support import FEATURE_GATES, FIELDS, SETTINGS, UNSUPPORTED, Support

CONDITION = "FieldsSupported"
REASON = "UnsupportedField"


@dataclass(frozen=True, slots=True)
class Finding:
    """One field (or group of fields) an object sets that Adze does not act on."""

    kind: str
    name: str
    path: str
    message: str
    reason: str = REASON

    def describe(self) -> str:
        return f"{self.kind} {self.name}: {self.path}: {self.message}"


# -- the schema walk -----------------------------------------------------------------------------------------

@functools.cache
def _schemas() -> dict[str, dict[str, Any]]:
    from reconciler.api.crds import generate_crds

    return {crd["spec"]["names"]["kind"]: crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            for crd in generate_crds()}


def schema_paths(kind: str) -> list[str]:
    """Every field of the kind's CRD schema: object properties joined by ``.``, list items as ``[]``; maps and
    lists of scalars are one field each."""
    found: list[str] = []

    def walk(node: Mapping[str, Any], path: str) -> None:
        properties = node.get("properties")
        if properties:
            for key, child in properties.items():
                walk(child, f"{path}.{key}" if path else key)
            return
        items = node.get("items")
        if node.get("type") == "array" and isinstance(items, Mapping) and items.get("properties"):
            walk(items, path + "[]")
            return
        found.append(path)

    walk(_schemas()[kind], "")
    return found


def entry_for(kind: str, path: str) -> tuple[str, Support] | None:
    """The registry entry covering a field: the longest registered path equal to it or above it."""
    registry = FIELDS.get(kind, {})
    candidate = path
    while True:
        if candidate in registry:
            return candidate, registry[candidate]
        cut = max(candidate.rfind("."), candidate.rfind("[]"))
        if cut <= 0:
            return None
        candidate = candidate[:cut]


# -- objects ---------------------------------------------------------------------------------------------------

def _values(value: Any, parts: list[str]) -> Iterator[Any]:
    """Every value at ``parts`` under ``value`` (``name[]`` walks a list's items)."""
    if not parts:
        yield value
        return
    head, rest = parts[0], parts[1:]
    each = head.endswith("[]")
    key = head[:-2] if each else head
    if not isinstance(value, Mapping) or value.get(key) is None:
        return
    child = value[key]
    if each:
        for item in child if isinstance(child, list) else ():
            yield from _values(item, rest)
    else:
        yield from _values(child, rest)


def _is_set(value: Any) -> bool:
    return value is not None and value != {} and value != []


def _covered_elsewhere(registry: Mapping[str, Support], prefix: str, value_path: str) -> bool:
    return any(other != prefix and other.startswith(prefix) and (value_path == other or
               value_path.startswith(other + ".") or value_path.startswith(other + "[]")) for other in registry)


def _set_paths(value: Any, path: str) -> Iterator[str]:
    """The leaf paths set under ``value`` (for telling which longer registry entry covers them)."""
    if isinstance(value, Mapping) and value:
        for key, child in value.items():
            if _is_set(child):
                yield from _set_paths(child, f"{path}.{key}")
    elif isinstance(value, list) and value and all(isinstance(item, Mapping) for item in value):
        for item in value:
            yield from _set_paths(item, path + "[]")
    elif _is_set(value):
        yield path


def unsupported_fields(manifest: Mapping[str, Any], gates: Mapping[str, bool] | None = None) -> list[Finding]:
    """What ``manifest`` (a NodePool, NodeClaim or EC2NodeClass) sets in its spec that Adze does not implement,
    or implements behind a feature gate that ``gates`` has off (default: Karpenter's defaults)."""
    kind = str(manifest.get("kind", ""))
    registry = FIELDS.get(kind)
    if registry is None:
        return []
    gates = {name: gate.upstream_default for name, gate in FEATURE_GATES.items()} if gates is None else gates
    name = str((manifest.get("metadata") or {}).get("name", ""))
    findings = []
    for path, support in registry.items():
        if not path.startswith("spec."):
            continue  # status and metadata are written by controllers, not set by users
        if support.status == UNSUPPORTED:
            if support.applies is not None and not support.applies(manifest):
                continue
            message = support.message
        elif support.gate and not gates.get(support.gate, False):
            message = f"needs the {support.gate} feature gate, which is off: Adze ignores it"
        else:
            continue
        parts = path.replace("[]", "[].").replace("..", ".").split(".")
        parts = [p for p in parts if p]
        set_leaves = [
            leaf for value in _values(manifest, parts) if _is_set(value)
            and not (support.inert is not None and support.inert(value))
            for leaf in (_set_paths(value, path) if not isinstance(value, (str, int, float, bool)) else [path])
        ]
        if any(not _covered_elsewhere(registry, path, leaf) for leaf in set_leaves):
            findings.append(Finding(kind, name, path, message))
    if kind == "EC2NodeClass":
        findings.extend(Finding(kind, name, problem.partition(":")[0].split(" ")[0], problem)
                        for problem in _family_refusals(manifest))
    return findings


def _family_refusals(nodeclass: Mapping[str, Any]) -> list[str]:
    """What the class's AMI family would silently drop (kubelet fields it does not map, RAID0 where it cannot
    assemble the array): the live NodeClass controller refuses these through ValidationSucceeded; plan and explain
    name them here. An unknown family is the API validation's error, not a finding."""
    try:
        family = family_of_nodeclass(dict(nodeclass))
    except UnknownAMIFamilyError:
        return []
    return unsupported_settings(family, nodeclass.get("spec"))


def findings_of(manifests: Iterable[Mapping[str, Any]], gates: Mapping[str, bool] | None = None) -> list[Finding]:
    """``unsupported_fields`` of every manifest, in order (plan and explain list them as risks)."""
    return [finding for manifest in manifests for finding in unsupported_fields(manifest, gates)]


def condition_message(findings: list[Finding]) -> str:
    return "; ".join(f"{f.path}: {f.message}" for f in findings)[:32768]


# -- gates and settings ----------------------------------------------------------------------------------------

def gate_refusal(name: str, value: bool) -> str | None:
    """Why a gate given this value must stop start-up: Adze does not implement it and this is not its upstream
    default (a default that is on is accepted with a warning, ``environment_check``)."""
    gate = FEATURE_GATES.get(name)
    if gate is None or gate.support.status != UNSUPPORTED or not value or value == gate.upstream_default:
        return None
    return f"{name}=true is not supported by Adze: {gate.support.message}"


def environment_check(env: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """(the one line that stops start-up, or None; warnings to log) for Karpenter's settings in ``env``."""
    warnings = []
    for var, setting in SETTINGS.items():
        support = setting.support
        if var not in env or support.status != UNSUPPORTED:
            continue
        value = env[var].strip()
        honoured = setting.honoured is None or value in setting.honoured
        if honoured:
            continue
        if value == setting.upstream_default:
            warnings.append(f"{var}={value} (Karpenter's default) is accepted, but {support.message}")
            continue
        return f"{var}={value} is not supported by Adze: {support.message}", warnings
    for name, gate in FEATURE_GATES.items():
        on = _gate_value(env.get("FEATURE_GATES", ""), name) is not False
        if gate.support.status == UNSUPPORTED and gate.upstream_default and on:
            warnings.append(f"feature gate {name} is on (Karpenter's default), but {gate.support.message}")
    return None, warnings


def _gate_value(text: str, name: str) -> bool | None:
    for part in text.split(","):
        key, _, value = part.partition("=")
        if key.strip() == name:
            return value.strip().lower() == "true"
    return None


# -- the support matrix ------------------------------------------------------------------------------------------

def _cell(support: Support) -> tuple[str, str]:
    if support.status == UNSUPPORTED:
        scope = " (on AL2, Bottlerocket and Windows)" if support.applies is not None else ""
        return f"unsupported{scope}", support.message
    detail = f"`{support.proof}`"
    if support.gate:
        detail = f"with gate `{support.gate}`; {detail}"
    if support.message:
        detail += f"; {support.message}"
    return "implemented", detail


def support_matrix_markdown() -> str:
    """The field / gate / setting tables of ``docs/karpenter-compatibility.md`` (generated: keep in sync)."""
    lines = []
    for kind, registry in FIELDS.items():
        lines += [f"### {kind}", "", "| field | status | proof or message |", "|---|---|---|"]
        for path, support in registry.items():
            status, detail = _cell(support)
            lines.append(f"| `{path}` | {status} | {detail} |")
        lines.append("")
    lines += ["### Feature gates (`FEATURE_GATES`)", "", "| gate | Karpenter default | status | proof or message |",
              "|---|---|---|---|"]
    for name, gate in FEATURE_GATES.items():
        status, detail = _cell(gate.support)
        lines.append(f"| `{name}` | {str(gate.upstream_default).lower()} | {status} | {detail} |")
    lines += ["", "### Settings (environment variables)", "",
              "| variable | Karpenter default | status | proof or message |", "|---|---|---|---|"]
    for var, setting in SETTINGS.items():
        status, detail = _cell(setting.support)
        if setting.support.status == UNSUPPORTED:
            values = setting.honoured
            honoured = "any value" if values is None else ", ".join(f"`{v}`" for v in sorted(values))
            detail += f" (accepted: {honoured})" if honoured else ""
        default = "" if setting.upstream_default is None else f"`{setting.upstream_default}`"
        lines.append(f"| `{var}` | {default} | {status} | {detail} |")
    return "\n".join(lines) + "\n"
