"""Wire formats of the Kubernetes API used by the fake API server: resource registry and
discovery documents, ``Status`` bodies, RFC 6902 JSON patch."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reconciler.kube.api import KNOWN_KINDS, ApiError, Kind
from reconciler.kube.semantics import clone, has_status_subresource, plural

EXTRA_KINDS = (
    Kind("v1", "ConfigMap"),
    Kind("v1", "Secret"),
    Kind("v1", "Service"),
    Kind("v1", "ServiceAccount"),
    Kind("events.k8s.io/v1", "Event"),
    Kind("karpenter.sh/v1", "NodeOverlay", namespaced=False),
)
ALL_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


@dataclass(slots=True, frozen=True)
class ResourceRegistry:
    """(group/version, plural) -> Kind for every kind the fake server serves."""

    kinds: dict[tuple[str, str], Kind]

    @classmethod
    def default(cls, extra: Iterable[Kind] = ()) -> ResourceRegistry:
        every = [*KNOWN_KINDS.values(), *EXTRA_KINDS, *extra]
        return cls({(kind.api_version, plural(kind)): kind for kind in every})

    def find(self, group_version: str, resource: str) -> Kind | None:
        return self.kinds.get((group_version, resource))

    def group_versions(self) -> list[str]:
        return sorted({gv for gv, _ in self.kinds})

    def resource_list(self, group_version: str) -> dict[str, Any]:
        resources: list[dict[str, Any]] = []
        for (gv, resource), kind in sorted(self.kinds.items()):
            if gv != group_version:
                continue
            resources.append(
                {
                    "name": resource,
                    "singularName": kind.kind.lower(),
                    "namespaced": kind.namespaced,
                    "kind": kind.kind,
                    "verbs": ALL_VERBS,
                }
            )
            if has_status_subresource(kind):
                resources.append(
                    {
                        "name": f"{resource}/status",
                        "singularName": "",
                        "namespaced": kind.namespaced,
                        "kind": kind.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if kind.kind == "Pod" and gv == "v1":
                resources.append(
                    {
                        "name": "pods/eviction",
                        "singularName": "",
                        "namespaced": True,
                        "kind": "Eviction",
                        "group": "policy",
                        "version": "v1",
                        "verbs": ["create"],
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": resources,
        }

    def group_list(self) -> dict[str, Any]:
        groups: dict[str, list[str]] = {}
        for gv in self.group_versions():
            group, _, version = gv.rpartition("/")
            if group:
                groups.setdefault(group, []).append(version)
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": group,
                    "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
                    "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]},
                }
                for group, versions in sorted(groups.items())
            ],
        }


def status_body(
    code: int,
    reason: str,
    message: str,
    *,
    kind: Kind | None = None,
    name: str = "",
    causes: list[dict[str, str]] | None = None,
    details_kind: str | None = None,
    uid: str = "",
) -> dict[str, Any]:
    """A ``metav1.Status`` body as the real server writes it: empty fields left out (a success usually has no
    message, an eviction's 500 no reason), ``details.kind`` the resource (``pods``) unless ``details_kind``
    says otherwise (validation errors name the Kind), ``details.group`` only outside the core group."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 300 else "Failure",
    }
    if message:
        body["message"] = message
    if reason:
        body["reason"] = reason
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if kind is not None:
        if kind.group:
            details["group"] = kind.group
        details["kind"] = details_kind or plural(kind)
    if uid:
        details["uid"] = uid
    if causes:
        details["causes"] = causes
    if details:
        body["details"] = details
    body["code"] = code
    return body


class WireError(ApiError):
    """An error answered with a ``details`` the plain ``ApiError`` mapping cannot express: the Kind instead of
    the resource (validation, delete preconditions), no name/kind at all (evictions), field causes."""

    def __init__(self, status: int, reason: str, message: str, *, details_kind: str | None = None,
                 causes: list[dict[str, str]] | None = None, bare: bool = False, name: str | None = None) -> None:
        super().__init__(status, reason, message)
        self.details_kind = details_kind
        self.causes = causes
        self.bare = bare  # no name, group or kind in details
        self.name = name


def kind_qualifier(kind: Kind) -> str:
    """``Pod``, ``NodePool.karpenter.sh``: how validation messages name a kind."""
    return f"{kind.kind}.{kind.group}" if kind.group else kind.kind


# How a field error's reason reads in its message (``field.ErrorType``) and in our schema validator's.
_CAUSE_PHRASES = (
    ("Required value", "FieldValueRequired"),
    ("is a required property", "FieldValueRequired"),
    ("Unsupported value", "FieldValueNotSupported"),
    ("is not one of", "FieldValueNotSupported"),
    ("Forbidden", "FieldValueForbidden"),
    ("Additional properties are not allowed", "FieldValueForbidden"),
    ("Duplicate value", "FieldValueDuplicate"),
    ("Too long", "FieldValueTooLong"),
    ("is too long", "FieldValueTooLong"),
    ("Too many", "FieldValueTooMany"),
)


def invalid(kind: Kind, name: str, problems: list[str], *, resource_form: bool = False) -> WireError:
    """A 422 as the API server writes one: ``<Kind.group> "<name>" is invalid: <field>: <reason>...`` with one
    cause per problem (``field: message``). ``resource_form``: the few checks (a missing resourceVersion)
    that name the resource instead (``leases.coordination.k8s.io``, details.kind ``leases``)."""
    causes = []
    for problem in problems:
        field, _, text = problem.partition(": ")
        reason = next((r for phrase, r in _CAUSE_PHRASES if phrase in text), "FieldValueInvalid")
        causes.append({"reason": reason, "message": text, "field": field})
    resource = f"{plural(kind)}.{kind.group}" if kind.group else plural(kind)
    subject = resource if resource_form else kind_qualifier(kind)
    listed = problems[0] if len(problems) == 1 else f"[{', '.join(problems)}]"
    return WireError(422, "Invalid", f'{subject} "{name}" is invalid: {listed}', causes=causes,
                     details_kind=plural(kind) if resource_form else kind.kind, name=name)


# Field selectors the API server supports beyond metadata.name and metadata.namespace (others: 400).
SELECTABLE_FIELDS: dict[tuple[str, str], frozenset[str]] = {
    ("v1", "Pod"): frozenset({
        "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork",
        "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName",
    }),
    ("v1", "Node"): frozenset({"spec.unschedulable"}),
    ("v1", "Event"): frozenset({
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
        "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
        "reportingComponent", "source", "type",
    }),
    ("v1", "Secret"): frozenset({"type"}),
    ("v1", "Namespace"): frozenset({"status.phase"}),
    ("apps/v1", "ReplicaSet"): frozenset({"status.replicas"}),
}
_ALWAYS_SELECTABLE = frozenset({"metadata.name", "metadata.namespace"})


def unsupported_field(kind: Kind, selector: str | None) -> str | None:
    """The first field of a field selector the kind cannot be selected by (the server answers 400)."""
    allowed = _ALWAYS_SELECTABLE | SELECTABLE_FIELDS.get((kind.api_version, kind.kind), frozenset())
    for term in (selector or "").split(","):
        field = term.split("!=")[0].split("=")[0].strip()
        if field and field not in allowed:
            return field
    return None


# Kinds whose strategy refuses an update without metadata.resourceVersion (AllowUnconditionalUpdate false):
# leases, PodDisruptionBudgets and every custom resource.
_VERSIONED_UPDATES = frozenset({("coordination.k8s.io/v1", "Lease"), ("policy/v1", "PodDisruptionBudget")})


def needs_resource_version(kind: Kind) -> bool:
    return (kind.api_version, kind.kind) in _VERSIONED_UPDATES or kind.group.startswith("karpenter.")


class JsonPatchError(ApiError):
    def __init__(self, message: str) -> None:
        super().__init__(422, "Invalid", message)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise JsonPatchError(f"json patch path {path!r} must start with /")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _parent(document: Any, parts: list[str], path: str) -> Any:
    node = document
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise JsonPatchError(f"json patch path {path!r} does not exist")
    return node


def _remove(document: Any, path: str) -> Any:
    parts = _pointer(path)
    parent = _parent(document, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise JsonPatchError(f"json patch path {path!r} does not exist")


def _add(document: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return clone(value)
    parent = _parent(document, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = clone(value)
    elif isinstance(parent, list) and (last == "-" or (last.isdigit() and int(last) <= len(parent))):
        parent.insert(len(parent) if last == "-" else int(last), clone(value))
    else:
        raise JsonPatchError(f"json patch path {path!r} does not exist")
    return document


def _get(document: Any, path: str) -> Any:
    node = document
    for part in _pointer(path):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise JsonPatchError(f"json patch path {path!r} does not exist")
    return node


def apply_json_patch(document: Any, operations: Any) -> Any:
    """RFC 6902 on a copy of ``document``."""
    if not isinstance(operations, list):
        raise JsonPatchError("a json patch must be a list of operations")
    result = clone(document)
    for index, operation in enumerate(operations):
        op, path = operation.get("op"), str(operation.get("path", ""))
        if op == "add":
            result = _add(result, path, operation.get("value"))
        elif op == "remove":
            _remove(result, path)
        elif op == "replace":
            _get(result, path)
            if _pointer(path):
                _remove(result, path)
            result = _add(result, path, operation.get("value"))
        elif op == "test":
            if _get(result, path) != operation.get("value"):
                raise JsonPatchError(f"json patch [{index}]: testing value {path} failed")
        elif op in ("move", "copy"):
            source = str(operation.get("from", ""))
            value = _remove(result, source) if op == "move" else clone(_get(result, source))
            result = _add(result, path, value)
        else:
            raise JsonPatchError(f"json patch [{index}]: unknown op {op!r}")
    return result
