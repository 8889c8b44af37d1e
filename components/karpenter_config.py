"""``adze:nodeClasses`` / ``adze:nodePools``: Karpenter v1 specs, checked by the reconciler's models.

Each entry is ``name`` plus the fields of the object's ``spec`` (EC2NodeClass or
NodePool), so a problem reads ``adze:nodePools[1].disruption.budgets[0].schedule``.
Where a NodeClass omits them, the stack fills in:

* ``role``: the node IAM role the stack creates. Setting ``role`` or ``instanceProfile`` is an error: the
  controller policy passes only that role to EC2, and only it has an ``EC2_LINUX`` access entry;
* ``subnetSelectorTerms`` / ``securityGroupSelectorTerms``: ``karpenter.sh/discovery: <clusterName>``,
  the tag the network and cluster components put on private subnets and the cluster security group.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from reconciler.api.errors import Problem, ValidationFailure, problems_from_validation_error

DISCOVERY_TAG = "karpenter.sh/discovery"
NODEPOOL_API_VERSION = "karpenter.sh/v1"
NODECLASS_API_VERSION = "karpenter.k8s.aws/v1"
NODECLASS_GROUP = "karpenter.k8s.aws"
NODECLASS_KIND = "EC2NodeClass"
# Stands in for the node role's name (an Output) while the spec is validated.
ROLE_PLACEHOLDER = "adze-node-role"
# The controller policy passes only the stack's node role to EC2 (iam:PassRole), and only that role has an
# EC2_LINUX access entry: any other role or profile would fail every launch, or leave nodes unable to join.
FOREIGN_IDENTITY = (
    "only the stack's node role can be used: the reconciler may pass no other role to EC2 (iam:PassRole) and no "
    "other role may join the cluster; remove this field"
)
# Names become label values (karpenter.sh/nodepool) and EC2 tag values, hence a DNS-1123 label.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(slots=True, frozen=True)
class NodeClassEntry:
    """An EC2NodeClass from config: ``spec`` has the stack defaults but ``role`` (see ``uses_stack_role``)."""

    name: str
    spec: Mapping[str, Any] = field(default_factory=dict)
    uses_stack_role: bool = True


@dataclass(slots=True, frozen=True)
class NodePoolEntry:
    name: str
    node_class: str
    spec: Mapping[str, Any] = field(default_factory=dict)


def ami_ssm_parameters(node_classes: tuple[NodeClassEntry, ...]) -> tuple[str, ...]:
    """Every ``amiSelectorTerms[].ssmParameter`` the node classes name (the controller policy must allow them)."""
    names = {
        str(term["ssmParameter"])
        for entry in node_classes
        for term in entry.spec.get("amiSelectorTerms") or []
        if isinstance(term, Mapping) and term.get("ssmParameter")
    }
    return tuple(sorted(names))


def discovery_selector(cluster_name: str) -> list[dict[str, Any]]:
    return [{"tags": {DISCOVERY_TAG: cluster_name}}]


def node_class_spec_with_defaults(spec: Mapping[str, Any], cluster_name: str) -> tuple[dict[str, Any], bool]:
    """The spec with discovery selectors filled in, and whether the stack's node role must be added."""
    filled = dict(spec)
    filled.setdefault("subnetSelectorTerms", discovery_selector(cluster_name))
    filled.setdefault("securityGroupSelectorTerms", discovery_selector(cluster_name))
    uses_stack_role = "role" not in filled and "instanceProfile" not in filled
    return filled, uses_stack_role


def validate_karpenter_entries(
    raw_classes: Any, raw_pools: Any, *, cluster_name: str, prefix: str = "adze:"
) -> tuple[list[Problem], tuple[NodeClassEntry, ...], tuple[NodePoolEntry, ...]]:
    """Check every entry with the reconciler's API models; returns (problems, node classes, node pools)."""
    problems: list[Problem] = []
    classes: list[NodeClassEntry] = []
    for path, name, spec in _entries(raw_classes, f"{prefix}nodeClasses", problems):
        filled, uses_stack_role = node_class_spec_with_defaults(spec, cluster_name)
        candidate = {**filled, "role": ROLE_PLACEHOLDER} if uses_stack_role else filled
        if not _check_object(NODECLASS_API_VERSION, NODECLASS_KIND, name, candidate, path, problems):
            continue
        foreign = [Problem(f"{path}.{key}", FOREIGN_IDENTITY) for key in ("role", "instanceProfile") if key in spec]
        if foreign:
            problems.extend(foreign)
            continue
        classes.append(NodeClassEntry(name=name, spec=filled, uses_stack_role=uses_stack_role))
    class_names = {entry.name for entry in classes} | _names(raw_classes)
    pools: list[NodePoolEntry] = []
    for path, name, spec in _entries(raw_pools, f"{prefix}nodePools", problems):
        if not _check_object(NODEPOOL_API_VERSION, "NodePool", name, spec, path, problems):
            continue
        ref = spec["template"]["spec"]["nodeClassRef"]
        ref_path = f"{path}.template.spec.nodeClassRef"
        if (ref.get("group"), ref.get("kind")) != (NODECLASS_GROUP, NODECLASS_KIND):
            problems.append(Problem(ref_path, f"must reference group {NODECLASS_GROUP}, kind {NODECLASS_KIND}"))
        elif ref.get("name") not in class_names:
            known = ", ".join(sorted(class_names)) or "none declared"
            problems.append(
                Problem(
                    f"{ref_path}.name",
                    f"no nodeClass named {ref.get('name')!r} in adze:nodeClasses ({known})",
                )
            )
        else:
            pools.append(NodePoolEntry(name=name, node_class=str(ref["name"]), spec=spec))
    return problems, tuple(classes), tuple(pools)


def _names(raw: Any) -> set[str]:
    if not isinstance(raw, list):
        return set()
    return {str(item["name"]) for item in raw if isinstance(item, Mapping) and isinstance(item.get("name"), str)}


def _entries(raw: Any, key_path: str, problems: list[Problem]) -> list[tuple[str, str, dict[str, Any]]]:
    """(config path, name, spec) of each well-formed entry; reports bad shapes and duplicate names."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(Problem(key_path, "must be a list of entries, each with a name"))
        return []
    entries, seen = [], set()
    for index, item in enumerate(raw):
        path = f"{key_path}[{index}]"
        if not isinstance(item, Mapping):
            problems.append(Problem(path, "must be a map with a name and the spec fields"))
            continue
        name = item.get("name")
        if not isinstance(name, str) or not name:
            problems.append(Problem(f"{path}.name", "required field is missing"))
            continue
        if not _NAME.fullmatch(name):
            problems.append(
                Problem(f"{path}.name", f"{name!r} must be a DNS-1123 label (lower-case alphanumerics and '-', <= 63)")
            )
            continue
        if name in seen:
            problems.append(Problem(f"{path}.name", f"duplicate name {name!r}"))
            continue
        seen.add(name)
        entries.append((path, name, {key: value for key, value in item.items() if key != "name"}))
    return entries


def _check_object(
    api_version: str, kind: str, name: str, spec: Mapping[str, Any], path: str, problems: list[Problem]
) -> bool:
    from reconciler.api import parse_object

    manifest = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": dict(spec)}
    try:
        parse_object(manifest)
    except ValidationFailure as failure:
        found = list(failure.problems)
    except ValidationError as err:
        found = problems_from_validation_error(err)
    else:
        return True
    problems.extend(Problem(_config_path(path, problem.path), problem.message) for problem in found)
    return False


def _config_path(entry_path: str, object_path: str) -> str:
    """``spec.limits.cpu`` -> ``<entry>.limits.cpu``; ``metadata.name`` -> ``<entry>.name``."""
    for head, replacement in (("spec", ""), ("metadata.name", ".name"), ("metadata", "")):
        if object_path == head:
            return entry_path + replacement
        if object_path.startswith(head + ".") or object_path.startswith(head + "["):
            rest = object_path[len(head) :]
            return entry_path + (replacement + rest if replacement else rest)
    return f"{entry_path}.{object_path}" if object_path else entry_path
