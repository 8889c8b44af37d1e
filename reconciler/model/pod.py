"""Pods as the engine sees them, built from API-server manifests by ``Pod.from_manifest``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.model import labels as wk
from reconciler.model.meta import (
    ManifestError,
    OwnerRef,
    controller_owner,
    owned_by_daemonset,
    parse_time,
    parse_time_or_none,
    str_map,
)
from reconciler.model.quantity import QuantityError
from reconciler.model.requirements import Requirement, RequirementError, Requirements
from reconciler.model.resources import EMPTY, PODS, Resources
from reconciler.model.selectors import LabelSelector, SelectorError
from reconciler.model.taints import TaintError, Toleration, parse_tolerations

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
ONE_POD = Resources({PODS: 1000})
_SCHEDULING_REQUESTS: dict[tuple[tuple[str, int], ...], Resources] = {}  # per pod shape (``_shared_requests``)


def _shared_requests(requests: Resources) -> Resources:
    """The one ``Resources`` object with ``requests``' items in their order (the order is kept: messages that
    name resources read it); started afresh past 4,096 shapes, a bounded memo."""
    if len(_SCHEDULING_REQUESTS) >= 4096:
        _SCHEDULING_REQUESTS.clear()
    return _SCHEDULING_REQUESTS.setdefault(tuple(requests.items()), requests)


@dataclass(slots=True, frozen=True)
class NodeSelectorTerm:
    """One term of required node affinity (its expressions are ANDed)."""

    requirements: Requirements
    has_match_fields: bool = False


@dataclass(slots=True, frozen=True)
class PodAffinityTerm:
    selector: LabelSelector
    topology_key: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None


@dataclass(slots=True, frozen=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(slots=True, frozen=True)
class PreferredNodeTerm:
    weight: int
    requirements: Requirements


@dataclass(slots=True, frozen=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()

    @property
    def is_hard(self) -> bool:
        return self.when_unsatisfiable == "DoNotSchedule"


@dataclass(slots=True, frozen=True)
class HostPort:
    ip: str
    port: int
    protocol: str

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.ip == other.ip or self.ip == "0.0.0.0" or other.ip == "0.0.0.0"

    def __str__(self) -> str:
        return f"{self.ip}:{self.port}/{self.protocol}"


@dataclass(slots=True, frozen=True)
class PodVolume:
    """A volume backed by a PersistentVolumeClaim (``ephemeral`` volumes name theirs ``<pod>-<volume>``)."""

    name: str
    claim_name: str


@dataclass(slots=True, frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    node_name: str = ""
    nominated_node_name: str = ""
    phase: str = "Pending"
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    owner: OwnerRef | None = None
    # Kubernetes effective requests (containers, init containers, sidecars, pod overhead).
    requests: Resources = EMPTY
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] = ()
    preferred_terms: tuple[PreferredNodeTerm, ...] = ()
    affinity_required: tuple[PodAffinityTerm, ...] = ()
    affinity_preferred: tuple[WeightedPodAffinityTerm, ...] = ()
    anti_affinity_required: tuple[PodAffinityTerm, ...] = ()
    anti_affinity_preferred: tuple[WeightedPodAffinityTerm, ...] = ()
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    volumes: tuple[PodVolume, ...] = ()
    priority: int = 0
    priority_class_name: str = ""
    runtime_class_name: str = ""
    scheduler_name: str = "default-scheduler"
    termination_grace_period_seconds: int = 30
    unschedulable_condition: bool | None = None  # None: kube-scheduler has not reported yet
    has_resource_claims: bool = False
    scheduling_gated: bool = False
    start_time: datetime | None = None  # status.startTime: do-not-disrupt durations count from it
    ready: bool | None = None  # the Ready condition; None: not reported
    daemonset_owned: bool = False  # ``meta.owned_by_daemonset``: the one DaemonSet rule
    # ``scheduling_requests`` once asked for (the pod and its requests never change; ``replace`` starts afresh).
    _scheduling_requests: Resources | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def scheduling_requests(self) -> Resources:
        """What the pod consumes on a node for scheduling: its requests plus one pod slot."""
        found = self._scheduling_requests
        if found is None:
            found = self.requests + ONE_POD
            # One object per shape: a workload's pods share it, so maps keyed by requests (the savings bound's,
            # per candidate pod) find it by identity instead of comparing equal values (Resources are immutable).
            found = _shared_requests(found)
            object.__setattr__(self, "_scheduling_requests", found)  # a memo on a frozen value
        return found

    @property
    def is_daemonset_pod(self) -> bool:
        return self.daemonset_owned

    @property
    def is_static(self) -> bool:
        return MIRROR_POD_ANNOTATION in self.annotations or (self.owner is not None and self.owner.kind == "Node")

    @property
    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def is_terminating(self) -> bool:
        return self.deletion_timestamp is not None

    @property
    def is_bound(self) -> bool:
        return bool(self.node_name)

    @property
    def is_active(self) -> bool:
        return not self.is_terminal and not self.is_terminating

    @property
    def do_not_disrupt(self) -> str | None:
        """The raw ``karpenter.sh/do-not-disrupt`` annotation value, if any."""
        return self.annotations.get(wk.DO_NOT_DISRUPT)

    @property
    def has_anti_affinity(self) -> bool:
        return bool(self.anti_affinity_required or self.anti_affinity_preferred)

    def is_provisionable(self) -> bool:
        """Karpenter provisions only for pods kube-scheduler gave up on.

        A pod with no PodScheduled condition yet counts as unschedulable (scenario
        files and snapshots rarely carry status); one that kube-scheduler reports
        as schedulable does not.
        """
        return (
            not self.node_name
            and not self.nominated_node_name
            and self.is_active
            and not self.is_daemonset_pod
            and not self.is_static
            and not self.scheduling_gated
            and self.unschedulable_condition is not False
        )

    @classmethod
    def from_manifest(
        cls, manifest: Mapping[str, Any], *, runtime_class_overhead: Mapping[str, Resources] | None = None,
        memo: SpecFactsMemo | None = None, kept: tuple[Mapping[str, Any], Pod] | None = None,
    ) -> Pod:
        """Parse a v1 Pod. ``runtime_class_overhead`` maps RuntimeClass name -> overhead.podFixed, used when
        the pod's ``spec.overhead`` was not filled in by admission. ``memo``: reuse what an earlier version of
        the pod's spec yielded (for manifests never edited in place, see ``SpecFactsMemo``). ``kept``: an earlier
        manifest of the pod, never edited since, and its parse: the metadata values (and start time) this
        manifest shares with it, the same objects, are taken from that parse."""
        metadata = manifest.get("metadata") or {}
        spec = manifest.get("spec") or {}
        status = manifest.get("status") or {}
        name = str(metadata.get("name") or "")
        namespace = str(metadata.get("namespace") or "default")
        where = f"Pod {namespace}/{name}"
        try:
            return _parse(cls, metadata, spec, status, name, namespace, runtime_class_overhead or {}, memo, kept)
        except (RequirementError, SelectorError, TaintError, QuantityError, ManifestError) as err:
            raise ManifestError(f"{where}: {err}") from None
        except ValueError as err:
            raise ManifestError(f"{where}: {err}") from None


class SpecFactsMemo:
    """What each Pod spec yields, kept while the spec's values are the same objects: the stored versions of a
    pod share them (a bind or a status write changes only ``nodeName`` or the status), so a pod's containers,
    affinity, tolerations and spreads are parsed once, not on every write. Only for manifests never edited
    in place, as the in-memory API server's stored objects are; each entry holds the values it was keyed by,
    so their ids are not reused while it lives."""

    __slots__ = ("_entries", "_limit")

    def __init__(self, limit: int = 100_000) -> None:
        self._entries: dict[tuple[Any, ...], tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self._limit = limit

    def facts(self, spec: Mapping[str, Any], name: str, overhead: Resources) -> dict[str, Any]:
        values = dict(spec)  # (C-level copies: this runs on every write of every pod)
        values.pop("nodeName", None)
        keys, held = tuple(values), tuple(values.values())
        memo_key = (name, overhead, keys, tuple(map(id, held)))
        entry = self._entries.get(memo_key)
        if entry is not None:
            return entry[1]
        facts = _spec_facts(spec, name, overhead)
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[memo_key] = (held, facts)
        return facts


def _parse(
    cls: type[Pod],
    metadata: Mapping[str, Any],
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    name: str,
    namespace: str,
    runtime_overheads: Mapping[str, Resources],
    memo: SpecFactsMemo | None = None,
    kept: tuple[Mapping[str, Any], Pod] | None = None,
) -> Pod:
    old_metadata = (kept[0].get("metadata") or {}) if kept is not None else None
    was: Any = kept[1] if kept is not None else None  # read only where ``shared`` says so

    def shared(key: str) -> bool:
        """Whether the metadata's ``key`` is the very value ``kept`` had (read without error then, so the first
        problem a manifest reports is still the same one)."""
        return old_metadata is not None and metadata.get(key) is old_metadata.get(key)

    runtime_class = str(spec.get("runtimeClassName") or "")
    overhead = Resources.from_manifest(spec.get("overhead"), path="spec.overhead")
    if not overhead and runtime_class in runtime_overheads:
        overhead = runtime_overheads[runtime_class]
    condition = _unschedulable_condition(status)
    # In the order the fields were always read, so a manifest with several problems reports the same first one.
    uid = str(metadata.get("uid") or f"{namespace}/{name}")
    labels = was.labels if shared("labels") else str_map(metadata.get("labels"), path="metadata.labels")
    annotations = (
        was.annotations if shared("annotations")
        else str_map(metadata.get("annotations"), path="metadata.annotations")
    )
    node_name = str(spec.get("nodeName") or "")
    nominated_node_name = str(status.get("nominatedNodeName") or "")
    phase = str(status.get("phase") or "Pending")
    creation_timestamp = (
        was.creation_timestamp if shared("creationTimestamp")
        else parse_time(metadata.get("creationTimestamp"), path="metadata.creationTimestamp")
    )
    deletion_timestamp = (
        was.deletion_timestamp if shared("deletionTimestamp")
        else parse_time(metadata.get("deletionTimestamp"), path="metadata.deletionTimestamp")
    )
    same_owners = shared("ownerReferences")
    owner = was.owner if same_owners else controller_owner(metadata)
    facts = memo.facts(spec, name, overhead) if memo is not None else _spec_facts(spec, name, overhead)
    start = status.get("startTime")
    return cls(
        namespace=namespace,
        name=name,
        uid=uid,
        labels=labels,
        annotations=annotations,
        node_name=node_name,
        nominated_node_name=nominated_node_name,
        phase=phase,
        creation_timestamp=creation_timestamp,
        deletion_timestamp=deletion_timestamp,
        owner=owner,
        unschedulable_condition=condition,
        # Unreadable counts as absent (do-not-disrupt durations then protect for ever: fail safe).
        start_time=(
            was.start_time if kept is not None and start is (kept[0].get("status") or {}).get("startTime")
            else parse_time_or_none(start)
        ),
        ready=_ready_condition(status),
        daemonset_owned=was.daemonset_owned if same_owners else owned_by_daemonset(metadata),
        **facts,
    )


def _spec_facts(spec: Mapping[str, Any], name: str, overhead: Resources) -> dict[str, Any]:
    """The Pod fields read from its spec, other than ``nodeName``."""
    affinity = spec.get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") or {}
    required = (node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
        "nodeSelectorTerms"
    ) or []
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    pod_affinity = affinity.get("podAffinity") or {}
    pod_anti = affinity.get("podAntiAffinity") or {}
    base = "spec.affinity"
    return {
        "requests": effective_requests(spec, overhead),
        "node_selector": _normalized_selector(str_map(spec.get("nodeSelector"), path="spec.nodeSelector")),
        "required_terms": tuple(
            _node_term(term, f"{base}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                             f".nodeSelectorTerms[{i}]")
            for i, term in enumerate(required)
        ),
        "preferred_terms": tuple(
            PreferredNodeTerm(
                int(item.get("weight") or 0),
                _node_term(item.get("preference") or {}, f"{base}.nodeAffinity.preferred[{i}].preference")
                .requirements,
            )
            for i, item in enumerate(preferred)
        ),
        "affinity_required": _affinity_terms(pod_affinity, f"{base}.podAffinity"),
        "affinity_preferred": _weighted_terms(pod_affinity, f"{base}.podAffinity"),
        "anti_affinity_required": _affinity_terms(pod_anti, f"{base}.podAntiAffinity"),
        "anti_affinity_preferred": _weighted_terms(pod_anti, f"{base}.podAntiAffinity"),
        "topology_spread": tuple(
            _spread(item, f"spec.topologySpreadConstraints[{i}]")
            for i, item in enumerate(spec.get("topologySpreadConstraints") or [])
        ),
        "tolerations": parse_tolerations(spec.get("tolerations"), path="spec.tolerations"),
        "host_ports": _host_ports(spec),
        "volumes": _volumes(spec, name),
        "priority": int(spec.get("priority") or 0),
        "priority_class_name": str(spec.get("priorityClassName") or ""),
        "runtime_class_name": str(spec.get("runtimeClassName") or ""),
        "scheduler_name": str(spec.get("schedulerName") or "default-scheduler"),
        "termination_grace_period_seconds": int(
            30 if spec.get("terminationGracePeriodSeconds") is None else spec["terminationGracePeriodSeconds"]
        ),
        "has_resource_claims": bool(spec.get("resourceClaims")),
        "scheduling_gated": bool(spec.get("schedulingGates")),
    }


def _unschedulable_condition(status: Mapping[str, Any]) -> bool | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "PodScheduled":
            if condition.get("status") == "True":
                return False
            return condition.get("reason") == "Unschedulable"
    return None


def _ready_condition(status: Mapping[str, Any]) -> bool | None:
    ready = None
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            ready = condition.get("status") == "True"
    return ready


def _container_requests(container: Mapping[str, Any], path: str) -> Resources:
    resources = container.get("resources") or {}
    requests = dict(resources.get("requests") or {})
    # The API server defaults a missing request to the limit.
    for name, limit in (resources.get("limits") or {}).items():
        requests.setdefault(name, limit)
    return Resources.from_manifest(requests, path=f"{path}.resources.requests")


def effective_requests(spec: Mapping[str, Any], overhead: Resources = EMPTY) -> Resources:
    """Kubernetes' effective pod request.

    max(sum of app containers + sidecars, the largest init container plus the
    sidecars started before it) per resource, pod-level ``spec.resources`` where
    set, plus the pod overhead.
    """
    total: dict[str, int] = {}
    for i, container in enumerate(spec.get("containers") or []):
        for name, value in _container_requests(container, f"spec.containers[{i}]").items():
            total[name] = total.get(name, 0) + value
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, container in enumerate(spec.get("initContainers") or []):
        requests = _container_requests(container, f"spec.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            for name, value in requests.items():
                total[name] = total.get(name, 0) + value
                sidecars[name] = sidecars.get(name, 0) + value
            candidate = dict(sidecars)
        else:
            candidate = dict(sidecars)
            for name, value in requests.items():
                candidate[name] = candidate.get(name, 0) + value
        for name, value in candidate.items():
            init_peak[name] = max(init_peak.get(name, 0), value)
    for name, value in init_peak.items():
        total[name] = max(total.get(name, 0), value)
    pod_level = (spec.get("resources") or {}).get("requests")
    if pod_level:
        total.update(Resources.from_manifest(pod_level, path="spec.resources.requests"))
    for name, value in overhead.items():
        total[name] = total.get(name, 0) + value
    return Resources(total)


def _node_term(raw: Mapping[str, Any], path: str) -> NodeSelectorTerm:
    if not isinstance(raw, Mapping):
        raise ManifestError(f"{path}: expected a map")
    requirements = [
        Requirement.from_manifest(expr, path=f"{path}.matchExpressions[{i}]")
        for i, expr in enumerate(raw.get("matchExpressions") or [])
    ]
    return NodeSelectorTerm(Requirements.of(*requirements), bool(raw.get("matchFields")))


def _affinity_term(raw: Mapping[str, Any], path: str) -> PodAffinityTerm:
    if not isinstance(raw, Mapping) or not raw.get("topologyKey"):
        raise ManifestError(f"{path}.topologyKey: required")
    selector = LabelSelector.from_manifest(raw.get("labelSelector"), path=f"{path}.labelSelector")
    namespace_selector = raw.get("namespaceSelector")
    return PodAffinityTerm(
        selector,
        str(raw["topologyKey"]),
        frozenset(str(n) for n in raw.get("namespaces") or ()),
        None
        if namespace_selector is None
        else LabelSelector.from_manifest(namespace_selector, path=f"{path}.namespaceSelector"),
    )


def _affinity_terms(section: Mapping[str, Any], path: str) -> tuple[PodAffinityTerm, ...]:
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    return tuple(_affinity_term(t, f"{path}.{key}[{i}]") for i, t in enumerate(section.get(key) or []))


def _weighted_terms(section: Mapping[str, Any], path: str) -> tuple[WeightedPodAffinityTerm, ...]:
    key = "preferredDuringSchedulingIgnoredDuringExecution"
    return tuple(
        WeightedPodAffinityTerm(
            int(item.get("weight") or 0), _affinity_term(item.get("podAffinityTerm") or {}, f"{path}.{key}[{i}]")
        )
        for i, item in enumerate(section.get(key) or [])
    )


def _spread(raw: Mapping[str, Any], path: str) -> TopologySpreadConstraint:
    if not isinstance(raw, Mapping) or not raw.get("topologyKey"):
        raise ManifestError(f"{path}.topologyKey: required")
    when = raw.get("whenUnsatisfiable") or "DoNotSchedule"
    if when not in ("DoNotSchedule", "ScheduleAnyway"):
        raise ManifestError(f"{path}.whenUnsatisfiable: {when!r} must be DoNotSchedule or ScheduleAnyway")
    max_skew = raw.get("maxSkew", 1)
    if not isinstance(max_skew, int) or max_skew < 1:
        raise ManifestError(f"{path}.maxSkew: must be a positive integer")
    min_domains = raw.get("minDomains")
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=str(raw["topologyKey"]),
        when_unsatisfiable=when,
        selector=LabelSelector.from_manifest(raw.get("labelSelector"), path=f"{path}.labelSelector"),
        min_domains=int(min_domains) if min_domains is not None else None,
        node_affinity_policy=str(raw.get("nodeAffinityPolicy") or "Honor"),
        node_taints_policy=str(raw.get("nodeTaintsPolicy") or "Ignore"),
        match_label_keys=tuple(str(k) for k in raw.get("matchLabelKeys") or ()),
    )


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    ports = []
    for container in spec.get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                ports.append(
                    HostPort(str(port.get("hostIP") or "0.0.0.0"), int(port["hostPort"]),
                             str(port.get("protocol") or "TCP"))
                )
    return tuple(ports)


def _volumes(spec: Mapping[str, Any], pod_name: str) -> tuple[PodVolume, ...]:
    volumes = []
    for volume in spec.get("volumes") or []:
        name = str(volume.get("name") or "")
        claim = volume.get("persistentVolumeClaim")
        if claim and claim.get("claimName"):
            volumes.append(PodVolume(name, str(claim["claimName"])))
        elif volume.get("ephemeral"):
            volumes.append(PodVolume(name, f"{pod_name}-{name}"))
    return tuple(volumes)


def _normalized_selector(selector: dict[str, str]) -> dict[str, str]:
    """Legacy keys (beta arch/os/instance-type, failure-domain zone/region, the EBS CSI zone) under their
    stable names, as Karpenter normalizes them; nodes carry the stable names too (``model.node``).
    A legacy key that disagrees with its stable key is kept as written, so the pod stays unschedulable."""
    if not any(key in wk.NORMALIZED_LABELS for key in selector):
        return selector
    result: dict[str, str] = {}
    for key, value in selector.items():
        stable = wk.NORMALIZED_LABELS.get(key, key)
        if result.get(stable, value) != value or selector.get(stable, value) != value:
            result[key] = value
        else:
            result[stable] = value
    return result
