"""API-server semantics shared by the in-memory cluster, the fake HTTP server and the live client.

Pure helpers: JSON merge patch (RFC 7386), label and field selectors, resource
plurals and REST paths, which kinds have a status subresource, timestamps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.kube.api import ApiError, Kind, Manifest

# Kinds whose writes to the main resource ignore ``status`` (and whose ``/status`` writes
# ignore everything else), as the real API server does for them.
STATUS_SUBRESOURCE_KINDS = frozenset(
    {
        ("v1", "Pod"),
        ("v1", "Node"),
        ("v1", "PersistentVolume"),
        ("v1", "PersistentVolumeClaim"),
        ("v1", "Namespace"),
        ("v1", "Service"),
        ("v1", "ReplicationController"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "DaemonSet"),
        ("batch/v1", "Job"),
        ("batch/v1", "CronJob"),
        ("policy/v1", "PodDisruptionBudget"),
        ("storage.k8s.io/v1", "VolumeAttachment"),
        ("karpenter.sh/v1", "NodePool"),
        ("karpenter.sh/v1", "NodeClaim"),
        ("karpenter.k8s.aws/v1", "EC2NodeClass"),
        ("karpenter.sh/v1alpha1", "NodeOverlay"),
    }
)
# Of those, the kinds whose create drops a client-supplied status (CRDs with a status
# subresource and the workload controllers); Nodes keep theirs, Pods start Pending.
STATUS_DROPPED_ON_CREATE = STATUS_SUBRESOURCE_KINDS - {("v1", "Node"), ("v1", "Pod")}

# Top-level fields that are not "spec" for generation purposes.
NON_SPEC_FIELDS = frozenset({"apiVersion", "kind", "metadata", "status"})


def has_status_subresource(kind: Kind) -> bool:
    return (kind.api_version, kind.kind) in STATUS_SUBRESOURCE_KINDS


def plural(kind: Kind | str) -> str:
    """The REST resource name: ``Pod`` -> ``pods``, ``StorageClass`` -> ``storageclasses``."""
    name = (kind.kind if isinstance(kind, Kind) else kind).lower()
    if name.endswith("s"):
        return name + "es"
    if name.endswith("y") and name[-2:-1] not in ("a", "e", "o", "u"):  # policy -> policies, overlay -> overlays
        return name[:-1] + "ies"
    return name + "s"


def qualified_resource(kind: Kind) -> str:
    """``pods`` for the core group, ``nodeclaims.karpenter.sh`` otherwise (as in API messages)."""
    return f"{plural(kind)}.{kind.group}" if kind.group else plural(kind)


def collection_path(kind: Kind, namespace: str | None = None) -> str:
    """REST path of a kind's collection, in one namespace when given and the kind is namespaced."""
    prefix = f"/apis/{kind.api_version}" if kind.group else f"/api/{kind.api_version}"
    if kind.namespaced and namespace:
        return f"{prefix}/namespaces/{namespace}/{plural(kind)}"
    return f"{prefix}/{plural(kind)}"


def object_path(kind: Kind, name: str, namespace: str | None = None, subresource: str | None = None) -> str:
    path = f"{collection_path(kind, namespace)}/{name}"
    return f"{path}/{subresource}" if subresource else path


def format_time(moment: datetime) -> str:
    """RFC 3339 with second precision, as metav1.Time serialises (a four-digit year, unlike glibc's %Y)."""
    moment = moment.astimezone(UTC)
    return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}Z"


def format_micro_time(moment: datetime) -> str:
    """RFC 3339 with microseconds, as metav1.MicroTime serialises (Lease and events.k8s.io times)."""
    moment = moment.astimezone(UTC)
    return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S.%f}Z"


def parse_time(text: str) -> datetime:
    """metav1.Time or MicroTime text to an aware UTC datetime."""
    value = text.strip().replace("Z", "+00:00")
    return datetime.fromisoformat(value).astimezone(UTC)


def check_grace_period(seconds: object) -> None:
    """A client-side check of ``DeleteOptions.gracePeriodSeconds``: ``None`` or a non-negative integer."""
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 0):
        raise ValueError(f"gracePeriodSeconds: {seconds!r} is not a non-negative integer")


_SCALARS = frozenset({str, int, float, bool, type(None)})
_LONG_LIST = 16  # shorter lists are copied faster by the plain loop


def clone(value: Any) -> Any:
    """A deep copy of JSON-like data, several times faster than ``copy.deepcopy``: containers are copied
    whole and only their non-scalar members copied again (most of a manifest's values are scalars)."""
    kind = type(value)
    if kind is dict:
        copied = dict(value)
        for key, item in copied.items():
            if type(item) not in _SCALARS:
                copied[key] = clone(item)
        return copied
    if kind is list:
        copied_list = list(value)
        # A long list of scalars (a NodeClaim's ~450 instance types) is checked by C-level loops.
        if len(copied_list) > _LONG_LIST and _SCALARS.issuperset(map(type, copied_list)):
            return copied_list
        for index, item in enumerate(copied_list):
            if type(item) not in _SCALARS:
                copied_list[index] = clone(item)
        return copied_list
    if isinstance(value, dict):
        return {key: clone(item) for key, item in value.items()}
    if isinstance(value, list):
        return [clone(item) for item in value]
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: returns a new value; ``None`` in the patch deletes a key."""
    if type(patch) is not dict and not isinstance(patch, Mapping):  # (the exact type first: ABC checks are slow)
        return clone(patch)
    result = dict(target) if type(target) is dict or isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class BadRequestError(ApiError):
    def __init__(self, message: str) -> None:
        super().__init__(400, "BadRequest", message)


class InvalidError(ApiError):
    """422: the object fails validation; the message names the field path."""

    def __init__(self, message: str) -> None:
        super().__init__(422, "Invalid", message)


# --- label selectors -------------------------------------------------------------------------

LabelMatcher = Callable[[Mapping[str, str]], bool]
_SET_TERM = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")
_EQUALITY_TERM = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$")


@dataclass(slots=True, frozen=True)
class Requirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside ``in (a, b)`` parentheses."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [term for term in terms if term.strip()]


def parse_label_selector(text: str | None) -> list[Requirement]:
    """The string form (``app=web,tier in (a,b),!legacy``); raises ``BadRequestError`` when malformed."""
    requirements: list[Requirement] = []
    for term in _split_terms(text or ""):
        equality = _EQUALITY_TERM.match(term)
        if equality:
            key, operator, value = equality.groups()
            requirements.append(Requirement(key, "NotIn" if operator == "!=" else "In", frozenset({value})))
            continue
        set_term = _SET_TERM.match(term)
        if not set_term:
            raise BadRequestError(f"labelSelector: unable to parse requirement {term.strip()!r}")
        negated, key, operator, values = set_term.groups()
        if operator:
            if negated:
                raise BadRequestError(f"labelSelector: {term.strip()!r} mixes ! with {operator}")
            members = frozenset(v.strip() for v in values.split(",") if v.strip())
            requirements.append(Requirement(key, "In" if operator == "in" else "NotIn", members))
        else:
            requirements.append(Requirement(key, "DoesNotExist" if negated else "Exists"))
    return requirements


def label_selector_matcher(text: str | None) -> LabelMatcher:
    requirements = parse_label_selector(text)
    return lambda labels: all(requirement.matches(labels) for requirement in requirements)


def selector_object_matcher(selector: Mapping[str, Any] | None) -> LabelMatcher:
    """A ``metav1.LabelSelector`` object (matchLabels + matchExpressions).

    A missing selector matches nothing and an empty one matches everything, as for
    policy/v1 PodDisruptionBudgets.
    """
    if selector is None:
        return lambda labels: False
    requirements = [Requirement(k, "In", frozenset({str(v)})) for k, v in (selector.get("matchLabels") or {}).items()]
    for index, expression in enumerate(selector.get("matchExpressions") or []):
        operator = expression.get("operator")
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise InvalidError(f"selector.matchExpressions[{index}].operator: {operator!r} is not supported")
        values = frozenset(str(v) for v in expression.get("values") or [])
        requirements.append(Requirement(str(expression.get("key", "")), operator, values))
    return lambda labels: all(requirement.matches(labels) for requirement in requirements)


# --- field selectors -------------------------------------------------------------------------

FieldMatcher = Callable[[Manifest], bool]


def _field_value(manifest: Manifest, path: str) -> str:
    value: Any = manifest
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


def field_selector_matcher(text: str | None) -> FieldMatcher:
    """``spec.nodeName=n1,metadata.name!=x``: equality terms over dotted paths (missing = empty)."""
    terms: list[tuple[str, bool, str]] = []
    for term in _split_terms(text or ""):
        match = _EQUALITY_TERM.match(term)
        if not match:
            raise BadRequestError(f"fieldSelector: unable to parse requirement {term.strip()!r}")
        path, operator, value = match.groups()
        terms.append((path, operator != "!=", value))
    return lambda manifest: all((_field_value(manifest, p) == v) == equal for p, equal, v in terms)


def node_name_selected(text: str) -> str | None:
    """The node a field selector pins with ``spec.nodeName=X`` (``==`` too), or None when it does not."""
    for term in _split_terms(text):
        match = _EQUALITY_TERM.match(term)
        if match and match.group(1) == "spec.nodeName" and match.group(2) in ("=", "==") and match.group(3):
            return match.group(3)
    return None


def merge_patch_diff(old: Any, new: Any) -> Any:
    """The RFC 7386 patch that turns ``old`` into ``new`` (``merge_patch(old, diff) == new``).

    Objects recurse (removed keys become ``None``); anything else is replaced whole, as merge
    patch replaces lists. ``new`` must not contain ``None`` values (merge patch cannot set null).
    """
    if not (type(old) is dict or isinstance(old, Mapping)) or not (type(new) is dict or isinstance(new, Mapping)):
        return clone(new)
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old:
            patch[key] = clone(value)
        elif old[key] != value:
            patch[key] = merge_patch_diff(old[key], value)
    return patch
