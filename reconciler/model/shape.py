"""Structural checks of the manifest fields the engine reads, so a wrong type fails with its exact path.

A shape is a type check (``STR``, ``INT``, ...), a ``dict`` of field -> shape (other fields are not read
and not checked), a one-item ``list`` meaning "a list of these", or ``MapOf(shape)`` for free-form keys.
``check_document_bounds`` refuses documents too deep or growing too large when YAML aliases are expanded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model.meta import ManifestError
from reconciler.model.quantity import QuantityError, parse_quantity

MAX_DEPTH = 64  # Kubernetes objects nest about 15 levels; this only stops pathological input
MAX_EXPANDED_NODES = 2_000_000  # values YAML aliases may add (each re-use of a shared subtree counts it again)
MAX_REPLICAS = 100_000
INT32 = 2**31 - 1
INT64 = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Scalar:
    types: tuple[type, ...]
    what: str
    low: int | None = None
    high: int | None = None

    def accepts(self, value: Any) -> bool:
        """Whether ``check`` passes (without building the error's path)."""
        kind = type(value)
        if kind is str:
            return str in self.types
        if kind is int:
            return int in self.types and (self.low is None or value >= self.low) and (
                self.high is None or value <= self.high)
        return False  # anything else: ``check`` decides (and names the problem)

    def check(self, value: Any, path: str) -> None:
        if isinstance(value, bool) and bool not in self.types:
            raise ManifestError(f"{path}: expected {self.what}, got a boolean")
        if not isinstance(value, self.types):
            raise ManifestError(f"{path}: expected {self.what}, got {_kind(value)}")
        if isinstance(value, int) and not isinstance(value, bool):
            if self.low is not None and value < self.low:
                raise ManifestError(f"{path}: {value} is below the minimum {self.low}")
            if self.high is not None and value > self.high:
                raise ManifestError(f"{path}: {value} is above the maximum {self.high}")


@dataclass(frozen=True, slots=True)
class QuantityShape:
    """A resource quantity: parsed here so a bad one fails at load with its path."""

    def check(self, value: Any, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ManifestError(f"{path}: expected a quantity such as 100m, 2 or 4Gi, got {_kind(value)}")
        try:
            milli = parse_quantity(value)
        except QuantityError as err:
            raise ManifestError(f"{path}: {err}") from None
        if milli < 0:
            raise ManifestError(f"{path}: {value!r} must not be negative")


@dataclass(frozen=True, slots=True)
class MapOf:
    values: Any


STR = Scalar((str,), "a string")
BOOL = Scalar((bool,), "true or false")
INT = Scalar((int,), "an integer", -INT64, INT64)
INT32_VALUE = Scalar((int,), "an integer", -INT32 - 1, INT32)
NON_NEGATIVE = Scalar((int,), "a non-negative integer", 0, INT64)
REPLICAS = Scalar((int,), "a non-negative integer", 0, MAX_REPLICAS)
INT_OR_STR = Scalar((int, str), "an integer or a percentage string", -INT32 - 1, INT32)
SCALAR = Scalar((str, int, float, bool), "a string or number")
QUANTITY = QuantityShape()

RESOURCE_LIST = MapOf(QUANTITY)
LABELS = MapOf(SCALAR)
SELECTOR = {"matchLabels": LABELS, "matchExpressions": [{"key": STR, "operator": STR, "values": [SCALAR]}]}
METADATA = {
    "name": STR, "namespace": STR, "labels": LABELS, "annotations": LABELS, "finalizers": [STR],
    "ownerReferences": [{"apiVersion": STR, "kind": STR, "name": STR, "uid": STR, "controller": BOOL}],
    "creationTimestamp": SCALAR, "deletionTimestamp": SCALAR,
}
CONTAINER = {
    "name": STR, "restartPolicy": STR,
    "resources": {"requests": RESOURCE_LIST, "limits": RESOURCE_LIST},
    "ports": [{"containerPort": INT32_VALUE, "hostPort": INT32_VALUE, "protocol": STR, "hostIP": STR}],
}
NODE_TERM = {"matchExpressions": [{"key": STR, "operator": STR, "values": [SCALAR]}],
             "matchFields": [{"key": STR, "operator": STR, "values": [SCALAR]}]}
POD_AFFINITY_TERM = {"labelSelector": SELECTOR, "namespaceSelector": SELECTOR, "namespaces": [STR],
                     "topologyKey": STR, "matchLabelKeys": [STR], "mismatchLabelKeys": [STR]}
POD_AFFINITY = {
    "requiredDuringSchedulingIgnoredDuringExecution": [POD_AFFINITY_TERM],
    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": INT32_VALUE, "podAffinityTerm": POD_AFFINITY_TERM}],
}
POD_SPEC = {
    "containers": [CONTAINER], "initContainers": [CONTAINER],
    "nodeName": STR, "nodeSelector": LABELS, "priority": INT32_VALUE, "priorityClassName": STR,
    "runtimeClassName": STR, "schedulerName": STR, "terminationGracePeriodSeconds": NON_NEGATIVE,
    "overhead": RESOURCE_LIST, "resources": {"requests": RESOURCE_LIST, "limits": RESOURCE_LIST},
    "tolerations": [{"key": STR, "operator": STR, "value": SCALAR, "effect": STR, "tolerationSeconds": INT}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [NODE_TERM]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": INT32_VALUE, "preference": NODE_TERM}],
        },
        "podAffinity": POD_AFFINITY,
        "podAntiAffinity": POD_AFFINITY,
    },
    "topologySpreadConstraints": [{
        "maxSkew": INT32_VALUE, "topologyKey": STR, "whenUnsatisfiable": STR, "labelSelector": SELECTOR,
        "minDomains": INT32_VALUE, "nodeAffinityPolicy": STR, "nodeTaintsPolicy": STR, "matchLabelKeys": [STR],
    }],
    "volumes": [{"name": STR, "persistentVolumeClaim": {"claimName": STR}, "ephemeral": {}}],
    "schedulingGates": [{"name": STR}], "resourceClaims": [{"name": STR}],
}
POD_STATUS = {"phase": STR, "nominatedNodeName": STR,
              "conditions": [{"type": STR, "status": STR, "reason": STR}]}
POD = {"metadata": METADATA, "spec": POD_SPEC, "status": POD_STATUS}
TEMPLATE = {"metadata": METADATA, "spec": POD_SPEC}
WORKLOAD = {"metadata": METADATA,
            "spec": {"replicas": REPLICAS, "parallelism": REPLICAS, "selector": SELECTOR, "template": TEMPLATE}}
NODE = {
    "metadata": METADATA,
    "spec": {"providerID": STR, "unschedulable": BOOL,
             "taints": [{"key": STR, "value": SCALAR, "effect": STR, "timeAdded": SCALAR}]},
    "status": {"capacity": RESOURCE_LIST, "allocatable": RESOURCE_LIST,
               "conditions": [{"type": STR, "status": STR, "reason": STR}]},
}
PDB = {"metadata": METADATA,
       "spec": {"selector": SELECTOR, "maxUnavailable": INT_OR_STR, "minAvailable": INT_OR_STR,
                "unhealthyPodEvictionPolicy": STR},
       "status": {"disruptionsAllowed": NON_NEGATIVE, "currentHealthy": NON_NEGATIVE,
                  "desiredHealthy": NON_NEGATIVE, "expectedPods": NON_NEGATIVE}}
GENERIC = {"metadata": METADATA, "spec": {}, "status": {}}

SHAPES_BY_KIND: dict[str, Any] = {
    "Pod": POD, "Node": NODE, "PodDisruptionBudget": PDB,
    "Deployment": WORKLOAD, "ReplicaSet": WORKLOAD, "StatefulSet": WORKLOAD, "Job": WORKLOAD,
    "DaemonSet": WORKLOAD,
}


def check_shape(value: Any, shape: Any, path: str) -> None:
    """Raise ``ManifestError`` naming the first field whose type does not match ``shape``."""
    if value is None:
        return  # absent and null read the same everywhere in the engine
    kind = type(shape)
    if kind is dict:
        if not isinstance(value, Mapping):
            raise ManifestError(f"{path}: expected a map, got {_kind(value)}")
        for key, field_shape in shape.items():
            if key in value:
                check_shape(value[key], field_shape, f"{path}.{key}")
    elif kind is Scalar or kind is QuantityShape:
        shape.check(value, path)
    elif kind is MapOf:
        if not isinstance(value, Mapping):
            raise ManifestError(f"{path}: expected a map, got {_kind(value)}")
        item_shape = shape.values
        if type(item_shape) is Scalar:
            # Labels and annotations: most of a manifest's values. Paths are built only for a value that fails.
            for key, item in value.items():
                if type(key) is not str:
                    raise ManifestError(f"{path}: keys must be strings, got {_kind(key)}")
                if item is not None and not item_shape.accepts(item):
                    item_shape.check(item, f"{path}.{key}")
            return
        for key, item in value.items():
            if not isinstance(key, str):
                raise ManifestError(f"{path}: keys must be strings, got {_kind(key)}")
            check_shape(item, item_shape, f"{path}.{key}")
    elif kind is list:
        if not isinstance(value, list):
            raise ManifestError(f"{path}: expected a list, got {_kind(value)}")
        item_shape = shape[0]
        if type(item_shape) is Scalar:
            for index, item in enumerate(value):
                if item is not None and not item_shape.accepts(item):
                    item_shape.check(item, f"{path}[{index}]")
            return
        for index, item in enumerate(value):
            check_shape(item, item_shape, f"{path}[{index}]")
    else:  # a subclass of dict or list as a shape: never built here, kept general
        raise TypeError(f"not a shape: {shape!r}")


def check_manifest_shape(manifest: Mapping[str, Any], path: str) -> None:
    """Check a manifest of a kind the engine reads (other kinds: metadata only)."""
    check_shape(manifest, SHAPES_BY_KIND.get(str(manifest.get("kind")), GENERIC), path)


def check_document_bounds(document: Any, path: str = "(document)") -> None:
    """Refuse input nested deeper than ``MAX_DEPTH`` or growing by more than ``MAX_EXPANDED_NODES`` values
    when its YAML aliases are expanded (an alias bomb is small on disk and huge in memory). A document
    without aliases is as large as its file, however many values it holds (a 5,000-node snapshot has
    millions), so only the values aliases add count against the bound."""
    sizes: dict[int, int] = {}
    added = [0]  # values that re-used (aliased) subtrees add once expanded

    def leaf(node: Any, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ManifestError(f"{path}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, str) and not node.isascii():
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                raise ManifestError(f"{path}: a string holds characters that are not valid Unicode") from None

    def size(node: dict[Any, Any] | list[Any], depth: int) -> int:
        # Leaves are handled inline: they are most of a snapshot, and a call per leaf was most of the cost.
        if depth > MAX_DEPTH:
            raise ManifestError(f"{path}: nested deeper than {MAX_DEPTH} levels")
        known = sizes.get(id(node))
        if known is not None:  # a subtree met again: an alias, expanded here once more
            added[0] += known
            if added[0] > MAX_EXPANDED_NODES:
                raise ManifestError(f"{path}: more than {MAX_EXPANDED_NODES} values once YAML aliases are expanded")
            return known
        total = 1
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                total += size(child, depth + 1)
            else:
                total += 1
                if depth >= MAX_DEPTH or (isinstance(child, str) and not child.isascii()):
                    leaf(child, depth + 1)
        sizes[id(node)] = total
        return total

    if isinstance(document, dict | list):
        if not _plainly_within_bounds(document):
            size(document, 0)  # aliases, great depth or a suspect string: the exact walk decides and names it
    else:
        leaf(document, 0)


def _plainly_within_bounds(document: dict[Any, Any] | list[Any]) -> bool:
    """True when the document shares no subtree (no YAML alias), is at most ``MAX_DEPTH`` deep and every string
    is ASCII: then ``check_document_bounds`` has nothing to refuse. One level at a time, without a call or a
    size per subtree, as most documents (every JSON one) are like that."""
    level: list[Any] = [document]
    seen: set[int] = set()
    visited = 0
    depth = 0
    while level:
        below: list[Any] = []
        for node in level:
            for child in node.values() if isinstance(node, dict) else node:
                kind = type(child)
                if kind is str:
                    if not child.isascii():
                        return False
                elif kind is dict or kind is list:
                    below.append(child)
                elif isinstance(child, dict | list | str):  # subclasses: left to the exact walk
                    return False
            if depth >= MAX_DEPTH and node:
                return False
        visited += len(below)
        seen.update(map(id, below))
        if len(seen) != visited:
            return False  # a subtree met twice
        level = below
        depth += 1
    return True


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    return f"{type(value).__name__} {value!r:.40}"
