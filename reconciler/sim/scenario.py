"""Scenario documents (``docs/scenario-format.md``): loading and validation.

Every problem raises ``ScenarioError`` with a one-line message that starts with
the offending key path, e.g. ``steps[2].advance: '3 minutes' is not a duration``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from reconciler import yamlio
from reconciler.api import ValidationFailure, is_karpenter_manifest, parse_object
from reconciler.model.meta import ManifestError
from reconciler.model.pod import Pod, SpecFactsMemo
from reconciler.model.shape import MAX_REPLICAS, check_document_bounds, check_manifest_shape
from reconciler.settings import Settings, SettingsError, parse_duration

STEP_KINDS = ("provision", "disrupt", "expire", "advance", "apply", "delete", "interrupt", "unavailable",
              "nodeCondition", "repair")
CONDITION_STATUSES = ("True", "False", "Unknown")
INTERRUPTION_KINDS = (
    "spot_interrupted",
    "rebalance_recommendation",
    "instance_stopped",
    "instance_terminated",
    "scheduled_change",
    "capacity_reservation_interrupted",  # an extension of the format: EC2 reclaims a reserved instance
)
DEFAULT_CLOCK = datetime(2026, 1, 1, tzinfo=UTC)
# Pods the scenario's workloads and Pods may declare at any one time (DaemonSet pods aside, counted as they
# are made): as many as one workload may have. Simulating 100,000 pods already takes minutes.
MAX_TOTAL_PODS = MAX_REPLICAS


class ScenarioError(ValueError):
    """An invalid scenario; the message names the key path."""


@dataclass(slots=True)
class Step:
    kind: str
    args: Any
    path: str


@dataclass(slots=True)
class Scenario:
    name: str
    settings: Settings
    clock: datetime
    catalog: Mapping[str, Any]
    objects: list[dict[str, Any]]
    steps: list[Step] = field(default_factory=list)
    source: str = ""
    # What validating the (kept, never changed) objects parsed of their pod specs, for the simulated cluster
    # that stores the same values (``CheckedObjects.spec_memo``); None: the cluster keeps its own.
    spec_memo: SpecFactsMemo | None = field(default=None, compare=False, repr=False)


def load_scenario_file(path: str | Path) -> Scenario:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as err:
        raise ScenarioError(f"{path}: cannot read scenario file ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason})") from None
    try:
        document = yamlio.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or "invalid YAML"
        raise ScenarioError(f"{path}: {problem}{where}") from None
    except RecursionError:
        raise ScenarioError(f"{path}: nested too deeply to read") from None
    return parse_scenario(document, source=str(path), default_name=file.stem)


class CheckedObjects:
    """Manifests already validated (held by identity): a snapshot's objects are checked once, however
    many scenarios (current, proposed, fresh provision) are built from them. Kept objects must not be
    changed afterwards."""

    def __init__(self) -> None:
        self._objects: dict[int, Any] = {}
        self._from_checked_source: dict[int, Any] = {}
        # Pod specs parsed while validating, reused by the simulated clusters that load these same objects.
        self.spec_memo = SpecFactsMemo()

    def __contains__(self, manifest: object) -> bool:
        return self._objects.get(id(manifest)) is manifest

    def add(self, manifest: Any) -> None:
        self._objects[id(manifest)] = manifest

    def add_from_checked_source(self, manifest: Any) -> None:
        """``manifest`` was cut from a document whose bounds (depth, aliases, strings) and field shapes were
        checked as it was read, holding a subset of its values: neither is walked again. Its content (names,
        quantities, requirements, the Karpenter objects' schemas) is still validated."""
        self._from_checked_source[id(manifest)] = manifest

    def bounded(self, manifest: object) -> bool:
        return self._objects.get(id(manifest)) is manifest or self.from_checked_source(manifest)

    def from_checked_source(self, manifest: object) -> bool:
        return self._from_checked_source.get(id(manifest)) is manifest


def parse_scenario(
    document: Any, *, source: str = "", default_name: str = "scenario", checked: CheckedObjects | None = None
) -> Scenario:
    """``checked``: objects found there are not validated again (nor counted again against the input
    bounds, which their first validation covered); the objects validated now are added to it."""
    if not isinstance(document, Mapping):
        raise ScenarioError("(document): a scenario must be a YAML map with catalog, objects and steps")
    try:
        given = document.get("objects")
        if checked is not None and isinstance(given, list):
            check_document_bounds({**document, "objects": [o for o in given if not checked.bounded(o)]})
        else:
            check_document_bounds(document)
    except ManifestError as err:
        raise ScenarioError(str(err)) from None
    known = {"name", "settings", "catalog", "objects", "steps", "description"}
    for key in document:
        if key not in known:
            raise ScenarioError(f"{key}: unknown top-level key (expected one of {', '.join(sorted(known))})")
    name = document.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise ScenarioError("name: must be a non-empty string")
    raw_settings = document.get("settings") or {}
    if not isinstance(raw_settings, Mapping):
        raise ScenarioError("settings: expected a map")
    try:
        settings = Settings.from_scenario(raw_settings)
    except SettingsError as err:
        raise ScenarioError(str(err)) from None
    clock = _parse_clock(raw_settings.get("clock"))
    catalog = document.get("catalog")
    if not isinstance(catalog, Mapping):
        raise ScenarioError("catalog: required map (preset and/or instanceTypes)")
    objects = document.get("objects") or []
    if not isinstance(objects, list):
        raise ScenarioError("objects: expected a list of Kubernetes manifests")
    for index, manifest in enumerate(objects):
        if checked is not None:
            if manifest in checked:
                continue
            check_manifest(manifest, f"objects[{index}]", shape_checked=checked.from_checked_source(manifest),
                           memo=checked.spec_memo)
            checked.add(manifest)
        else:
            check_manifest(manifest, f"objects[{index}]")
    raw_steps = document.get("steps") or []
    if not isinstance(raw_steps, list):
        raise ScenarioError("steps: expected a list")
    steps = [_parse_step(raw, f"steps[{index}]") for index, raw in enumerate(raw_steps)]
    for step in steps:
        if step.kind == "repair" and not settings.gate("NodeRepair"):
            raise ScenarioError(f"{step.path}.repair: node repair needs settings.featureGates.NodeRepair: true")
    _check_total_pods(objects, steps)
    return Scenario(name, settings, clock, catalog, [dict(o) for o in objects], steps, source,
                    spec_memo=checked.spec_memo if checked is not None else None)


def _declared_pods(manifest: Mapping[str, Any]) -> int:
    """Pods a validated manifest stands for: a Pod (or its top-level replicas), a workload's replicas."""
    kind = manifest.get("kind")
    if kind == "Pod":
        return int(manifest.get("replicas", 1))
    spec = manifest.get("spec") or {}
    field_name = {"Deployment": "replicas", "ReplicaSet": "replicas", "StatefulSet": "replicas",
                  "Job": "parallelism"}.get(str(kind))
    if field_name is None:
        return 0
    count = spec.get(field_name)
    return 1 if count is None else int(count)


def _check_total_pods(objects: list[Any], steps: list[Step]) -> None:
    """The pods declared at any time (objects, then each apply/delete) stay within ``MAX_TOTAL_PODS``."""
    def key(kind: Any, namespace: Any, name: Any) -> tuple[str, str, str]:
        return str(kind), str(namespace or "default"), str(name)

    declared = {key(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): _declared_pods(o)
                for o in objects}
    _check_total(sum(declared.values()), "objects")
    for step in steps:
        if step.kind == "apply":
            for manifest in step.args:
                declared[key(manifest["kind"], manifest["metadata"].get("namespace"), manifest["metadata"]["name"])] \
                    = _declared_pods(manifest)
            _check_total(sum(declared.values()), f"{step.path}.apply")
        elif step.kind == "delete":
            for ref in step.args:
                declared.pop(key(ref["kind"], ref.get("namespace"), ref["name"]), None)


def _check_total(total: int, where: str) -> None:
    if total > MAX_TOTAL_PODS:
        raise ScenarioError(f"{where}: {total:,} pods declared at once (Pods and workload replicas); "
                            f"a scenario may hold at most {MAX_TOTAL_PODS:,}")


def _parse_clock(value: Any) -> datetime:
    if value is None:
        return DEFAULT_CLOCK
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ScenarioError(f"settings.clock: {value!r} is not an RFC 3339 time such as 2026-01-01T00:00:00Z") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def check_manifest(manifest: Any, path: str, *, shape_checked: bool = False, memo: SpecFactsMemo | None = None) -> None:
    """``shape_checked``: the manifest's field types were checked where it came from (a kubectl dump's item).
    ``memo``: keeps what a Pod's spec yields, for manifests never changed afterwards (``CheckedObjects``)."""
    if not isinstance(manifest, Mapping):
        raise ScenarioError(f"{path}: expected a Kubernetes manifest (a map)")
    for key in ("apiVersion", "kind"):
        if not isinstance(manifest.get(key), str) or not manifest.get(key):
            raise ScenarioError(f"{path}.{key}: required")
    metadata = manifest.get("metadata")
    if not isinstance(metadata, Mapping):
        raise ScenarioError(f"{path}.metadata: required map")
    if not isinstance(metadata.get("name"), str) or not metadata.get("name"):
        raise ScenarioError(f"{path}.metadata.name: required")
    if not _DNS_SUBDOMAIN.fullmatch(metadata["name"]) or len(metadata["name"]) > 253:
        raise ScenarioError(f"{path}.metadata.name: {metadata['name']!r} is not a valid Kubernetes name "
                            "(lowercase letters, digits, '-' and '.', starting and ending with a letter or digit)")
    replicas = manifest.get("replicas")
    if replicas is not None and (manifest.get("kind") != "Pod" or not isinstance(replicas, int) or replicas < 0
                                 or isinstance(replicas, bool)):
        raise ScenarioError(f"{path}.replicas: only a Pod may carry top-level replicas, a non-negative integer")
    if isinstance(replicas, int) and replicas > MAX_REPLICAS:
        raise ScenarioError(f"{path}.replicas: {replicas} is above the maximum {MAX_REPLICAS}")
    if not shape_checked:
        try:
            check_manifest_shape(manifest, path)
        except ManifestError as err:
            raise ScenarioError(str(err)) from None
    try:
        _check_content(manifest, path, memo)
    except ScenarioError:
        raise
    except (ValueError, TypeError, AttributeError, KeyError, ArithmeticError) as err:
        # A shape no check above foresaw: still one line naming the object, never a traceback.
        raise ScenarioError(f"{path}: malformed {manifest.get('kind')} ({type(err).__name__}: {err})") from None


# RFC 1123 subdomain, what the API server requires of most object names.
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")

_POD_TEMPLATE_KINDS = {"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job"}


def _check_content(manifest: Mapping[str, Any], path: str, memo: SpecFactsMemo | None = None) -> None:
    """Validate what the engine will read, so a bad object fails at load naming its exact path."""
    if is_karpenter_manifest(manifest):
        try:
            parse_object(manifest, prefix=path)
        except ValidationFailure as failure:
            more = f" (and {len(failure.problems) - 1} more problem(s))" if len(failure.problems) > 1 else ""
            raise ScenarioError(f"{failure.problems[0]}{more}") from None
        return
    kind = manifest.get("kind")
    if kind == "PodDisruptionBudget":
        _check_budget(manifest.get("spec") or {}, f"{path}.spec")
        return
    if kind == "Pod":
        pod, where = manifest, path
    elif kind in _POD_TEMPLATE_KINDS:
        template = (manifest.get("spec") or {}).get("template")
        if not isinstance(template, Mapping):
            raise ScenarioError(f"{path}.spec.template: required for a {kind}")
        pod = {"metadata": {**(template.get("metadata") or {}), "name": manifest["metadata"]["name"]},
               "spec": template.get("spec") or {}}
        where = f"{path}.spec.template"
        memo = None  # a template's pods get copies of its spec: nothing would reuse this parse
    else:
        return
    try:
        Pod.from_manifest(pod, memo=memo)
    except ManifestError as err:
        detail = str(err).split(": ", 1)[1] if ": " in str(err) else str(err)
        raise ScenarioError(f"{where}.{detail}") from None


def _check_budget(spec: Mapping[str, Any], path: str) -> None:
    """minAvailable / maxUnavailable are a non-negative integer or an "N%" string, as the API validates."""
    for key in ("minAvailable", "maxUnavailable"):
        value = spec.get(key)
        if value is None:
            continue
        text = str(value)
        valid = (isinstance(value, int) and not isinstance(value, bool) and value >= 0) or (
            isinstance(value, str) and re.fullmatch(r"\d{1,9}%?", text) is not None
            and (not text.endswith("%") or int(text[:-1]) <= 100)
        )
        if not valid:
            raise ScenarioError(f"{path}.{key}: {value!r} must be a non-negative integer or a percentage such as 50%")
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        raise ScenarioError(f"{path}: minAvailable and maxUnavailable are mutually exclusive")


def _parse_step(raw: Any, path: str) -> Step:
    if not isinstance(raw, Mapping) or len(raw) != 1:
        raise ScenarioError(f"{path}: a step is a map with exactly one key, one of {', '.join(STEP_KINDS)}")
    ((kind, args),) = raw.items()
    if kind not in STEP_KINDS:
        raise ScenarioError(f"{path}.{kind}: unknown step (expected one of {', '.join(STEP_KINDS)})")
    where = f"{path}.{kind}"
    if kind == "advance":
        try:
            seconds = parse_duration(str(args), name=where)
        except SettingsError as err:
            raise ScenarioError(str(err)) from None
        if seconds < 0:
            raise ScenarioError(f"{where}: cannot move the clock backwards")
        return Step(kind, seconds, path)
    if kind in ("provision", "disrupt", "expire", "repair"):
        allowed = {"provision": {"launch"}, "disrupt": {"until"}, "expire": set(), "repair": set()}[kind]
        args = _check_options(args, where, allowed)
        if kind == "provision" and args.get("launch", "ready") not in ("ready", "pending"):
            raise ScenarioError(f"{where}.launch: must be ready or pending")
        if kind == "disrupt" and args.get("until", "once") not in ("once", "stable"):
            raise ScenarioError(f"{where}.until: must be stable")
        return Step(kind, args, path)
    if kind == "apply":
        if not isinstance(args, list):
            raise ScenarioError(f"{where}: expected a list of manifests")
        for index, manifest in enumerate(args):
            check_manifest(manifest, f"{where}[{index}]")
        return Step(kind, args, path)
    if kind == "delete":
        if not isinstance(args, list):
            raise ScenarioError(f"{where}: expected a list of {{kind, name, namespace}} references")
        for index, ref in enumerate(args):
            if not isinstance(ref, Mapping) or not ref.get("kind") or not ref.get("name"):
                raise ScenarioError(f"{where}[{index}]: a reference needs kind and name (and namespace)")
            for key in ("kind", "name", "namespace"):
                if key in ref and not isinstance(ref[key], str):
                    raise ScenarioError(f"{where}[{index}].{key}: expected a string")
        return Step(kind, args, path)
    if kind == "nodeCondition":
        return Step(kind, _check_node_condition(args, where), path)
    if kind == "interrupt":
        if not isinstance(args, Mapping) or not args.get("node") or not isinstance(args["node"], str):
            raise ScenarioError(f"{where}.node: required, a node name (the node whose instance is interrupted)")
        if args.get("kind", "spot_interrupted") not in INTERRUPTION_KINDS:
            raise ScenarioError(f"{where}.kind: {args.get('kind')!r} must be one of {', '.join(INTERRUPTION_KINDS)}")
        return Step(kind, dict(args), path)
    # unavailable
    if not isinstance(args, list):
        raise ScenarioError(f"{where}: expected a list of {{instanceType, zone, capacityType}}")
    for index, offering in enumerate(args):
        if not isinstance(offering, Mapping) or not isinstance(offering.get("instanceType"), str):
            raise ScenarioError(f"{where}[{index}].instanceType: required, an instance type name")
        for key in ("zone", "capacityType"):
            if offering.get(key) is not None and not isinstance(offering[key], str):
                raise ScenarioError(f"{where}[{index}].{key}: expected a string")
        unknown = set(offering) - {"instanceType", "zone", "capacityType"}
        if unknown:
            raise ScenarioError(f"{where}[{index}].{sorted(unknown)[0]}: unknown key")
    return Step(kind, args, path)


def _check_node_condition(args: Any, where: str) -> dict[str, Any]:
    """``{node, type, status[, reason, message]}``: a condition the node's kubelet or agent reports from now on."""
    if not isinstance(args, Mapping):
        raise ScenarioError(f"{where}: expected a map {{node, type, status}}")
    for key in ("node", "type"):
        if not isinstance(args.get(key), str) or not args[key]:
            raise ScenarioError(f"{where}.{key}: required, a string")
    args = dict(args)
    if isinstance(args.get("status"), bool):  # YAML reads an unquoted False as a boolean
        args["status"] = str(args["status"])
    if args.get("status") not in CONDITION_STATUSES:
        raise ScenarioError(f"{where}.status: {args.get('status')!r} must be one of {', '.join(CONDITION_STATUSES)}")
    for key in ("reason", "message"):
        if key in args and not isinstance(args[key], str):
            raise ScenarioError(f"{where}.{key}: expected a string")
    unknown = set(args) - {"node", "type", "status", "reason", "message"}
    if unknown:
        raise ScenarioError(f"{where}.{sorted(unknown)[0]}: unknown key")
    return dict(args)


def _check_options(args: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    if args is None:
        return {}
    if not isinstance(args, Mapping):
        raise ScenarioError(f"{where}: expected a map of options ({{}} for none)")
    for key in args:
        if key not in allowed:
            raise ScenarioError(f"{where}.{key}: unknown option")
    return dict(args)
