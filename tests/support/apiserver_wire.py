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
) -> dict[str, Any]:
    """A ``metav1.Status`` failure body (the real server always sets ``message``)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 300 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    details: dict[str, Any] = {}
    if kind is not None:
        details.update(group=kind.group, kind=plural(kind))
    if name:
        details["name"] = name
    if causes:
        details["causes"] = causes
    if details:
        body["details"] = details
    return body


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
