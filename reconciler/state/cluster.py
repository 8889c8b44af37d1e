"""``ClusterState``: the snapshot every decision reads.

Fed incrementally with API-server manifests (``upsert``/``remove``) by the live
reflectors and by the simulator alike. It parses what the engine needs into
domain types (``Pod``, ``Node``, ``NodeClaim``, ``NodePool``), keeps the rest as
manifests, and exposes per-node merged views (``StateNode``), pending pods,
DaemonSet pod templates and per-NodePool resource totals.

Marking nodes for deletion and nominating them are plain flags set by the
engine's callers; nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar, cast

from reconciler.model import labels as wk
from reconciler.model.meta import ManifestError, object_key
from reconciler.model.node import Node, NodeClaim
from reconciler.model.nodepool import NODES, NodePool
from reconciler.model.pod import Pod, SpecFactsMemo
from reconciler.model.resources import Resources
from reconciler.state.node import StateNode, build_state_node
from reconciler.state.views import node_counts

Manifest = dict[str, Any]
_Parsed = TypeVar("_Parsed", Node, NodeClaim, Pod)
_JOURNAL_LENGTH = 64  # versions of the nodes whose changed names are kept (``node_changes_since``)

# kind -> attribute holding the raw manifests of kinds kept as-is.
_RAW_KINDS = {
    "DaemonSet": "daemonsets",
    "PodDisruptionBudget": "pdbs",
    "PersistentVolume": "persistent_volumes",
    "PersistentVolumeClaim": "persistent_volume_claims",
    "StorageClass": "storage_classes",
    "PriorityClass": "priority_classes",
    "RuntimeClass": "runtime_classes",
    "CSINode": "csi_nodes",
    "Namespace": "namespaces",
    "EC2NodeClass": "nodeclasses",
    "NodeOverlay": "nodeoverlays",
    "Deployment": "deployments",
    "ReplicaSet": "replicasets",
    "StatefulSet": "statefulsets",
    "Job": "jobs",
}


class ClusterState:
    def __init__(self, *, immutable_manifests: bool = False, spec_memo: SpecFactsMemo | None = None) -> None:
        """``immutable_manifests``: the caller never edits a manifest (nor any value in it) it has handed over,
        as the in-memory API server's stored objects are never edited; then a pod's spec is parsed once for
        all its versions that share the spec's values (``SpecFactsMemo``; ``spec_memo``: one already holding
        the parses of the same never-changed values, else a new one)."""
        self._spec_memo = (spec_memo if spec_memo is not None else SpecFactsMemo()) if immutable_manifests else None
        self.pods: dict[str, Pod] = {}
        self.pod_manifests: dict[str, Manifest] = {}
        self.nodes: dict[str, Node] = {}
        self.nodeclaims: dict[str, NodeClaim] = {}
        self.nodepools: dict[str, NodePool] = {}
        self.nodepool_manifests: dict[str, Manifest] = {}
        self.nodeclaim_manifests: dict[str, Manifest] = {}
        self.node_manifests: dict[str, Manifest] = {}
        self.daemonsets: dict[str, Manifest] = {}
        self.pdbs: dict[str, Manifest] = {}
        self.persistent_volumes: dict[str, Manifest] = {}
        self.persistent_volume_claims: dict[str, Manifest] = {}
        self.storage_classes: dict[str, Manifest] = {}
        self.priority_classes: dict[str, Manifest] = {}
        self.runtime_classes: dict[str, Manifest] = {}
        self.csi_nodes: dict[str, Manifest] = {}
        self.namespaces: dict[str, Manifest] = {}
        self.nodeclasses: dict[str, Manifest] = {}
        self.nodeoverlays: dict[str, Manifest] = {}
        self.deployments: dict[str, Manifest] = {}
        self.replicasets: dict[str, Manifest] = {}
        self.statefulsets: dict[str, Manifest] = {}
        self.jobs: dict[str, Manifest] = {}
        self._pods_by_node: dict[str, dict[str, Pod]] = {}
        self._marked: set[str] = set()
        self._nominated: dict[str, datetime] = {}
        self._state_nodes: dict[str, StateNode] | None = None
        # Incremental builds: the names whose StateNode may differ from the last build's (None: any may), what
        # the last full build matched (StateNode name -> its NodeClaim's name, NodeClaim -> StateNode name), and
        # per build the names whose StateNode changed (``node_changes_since``).
        self._last_nodes: dict[str, StateNode] | None = None
        self._dirty: set[str] | None = None
        self._rematch: set[str] = set()  # Nodes and NodeClaims that came, went or changed how they are matched
        self._claim_of: dict[str, str | None] = {}
        self._keys_of_claim: dict[str, list[str]] = {}  # two Nodes may match one NodeClaim
        self._match_index = _MatchIndex()  # what ``_claim_of`` was matched by, to re-match a few names
        self._generation = 0
        # NodeClaims with a deletionTimestamp, and every NodeClaim's place in ``nodeclaims`` (insertion order).
        self._deleting_claims: set[str] = set()
        self._claim_places: dict[str, int] = {}
        self._claims_added = 0
        self._journal: list[tuple[int, frozenset[str]]] = []
        self._daemon_pods: list[Pod] | None = None
        self._overheads: dict[str, Resources] | None = None  # (``_runtime_overheads``)
        # Rebuilding every StateNode after each write would throw away their memoized scheduling
        # views; a node whose inputs are unchanged keeps its StateNode (see ``_state_node``).
        self._pod_versions: dict[str, int] = {}
        self._volume_version = 0
        self._previous: dict[str, tuple[StateNode, int, int]] = {}
        # Views of all nodes and their pods together (see ``nodes_memo``), valid for one ``_state_nodes``.
        self._nodes_memo: tuple[dict[str, StateNode], dict[str, Any]] | None = None
        # Views kept across versions of the nodes, each brought up to date by its owner from what changed.
        self.carried: dict[str, Any] = {}
        # Pods kept indexed as they are written (a decision asks for them many times between writes): those
        # Karpenter provisions for, and the unbound ones still running, in ``pod_manifests`` order.
        self._provisionable: dict[str, Pod] = {}
        self._pending: list[Pod] | None = None
        self._unbound: dict[str, None] = {}

    @classmethod
    def from_manifests(cls, manifests: Iterable[Mapping[str, Any]]) -> ClusterState:
        state = cls()
        for manifest in manifests:
            state.upsert(manifest)
        return state

    # -- feeding -------------------------------------------------------------------------------

    def upsert(self, manifest: Mapping[str, Any]) -> None:
        """Add or replace one object; raises ``ManifestError`` (naming the object and field) on bad input."""
        kind = str(manifest.get("kind", ""))
        key = object_key(manifest)
        if kind == "Pod":
            self._upsert_pod(key, dict(manifest))
        elif kind == "Node":
            previous_node = self.nodes.get(key)
            node = Node.from_manifest(manifest, kept=self._kept(self.node_manifests, key, previous_node))
            self.nodes[key] = node
            self.node_manifests[key] = dict(manifest)
            # The same node again (its claim still found the same way): only its StateNode changes.
            same = previous_node is not None and previous_node.provider_id == node.provider_id
            self._invalidate(key, rematch=not same)
        elif kind == "NodeClaim":
            previous_claim = self.nodeclaims.get(key)
            claim = NodeClaim.from_manifest(manifest, kept=self._kept(self.nodeclaim_manifests, key, previous_claim))
            if previous_claim is None:
                self._claims_added += 1
                self._claim_places[key] = self._claims_added
            self.nodeclaims[key] = claim
            (self._deleting_claims.add if claim.deletion_timestamp else self._deleting_claims.discard)(key)
            self.nodeclaim_manifests[key] = dict(manifest)
            same = (previous_claim is not None and previous_claim.node_name == claim.node_name
                    and previous_claim.provider_id == claim.provider_id)
            self._invalidate(key, rematch=not same)
        elif kind == "NodePool":
            self.nodepools[key] = NodePool.from_manifest(manifest)
            self.nodepool_manifests[key] = dict(manifest)
        elif kind in _RAW_KINDS:
            store = getattr(self, _RAW_KINDS[kind])
            previous = store.get(key)
            store[key] = dict(manifest)
            if kind == "DaemonSet" and previous is not None and _template(previous) == _template(manifest):
                return  # a status update: the pods it would run are unchanged
            self._after_raw_change(kind)

    def _kept(
        self, manifests: Mapping[str, Manifest], key: str, parsed: _Parsed | None
    ) -> tuple[Manifest, _Parsed] | None:
        """The manifest ``parsed`` was read from, for a new version to share the parse of what a write left alone:
        only when manifests are never edited (immutable_manifests; then a value still the same object is
        unchanged)."""
        kept = manifests.get(key) if self._spec_memo is not None and parsed is not None else None
        return (kept, parsed) if kept is not None and parsed is not None else None

    def remove(self, ref: Mapping[str, Any] | Any) -> None:
        """Forget an object, given its manifest or any ref with ``kind``, ``name`` and ``namespace``."""
        if isinstance(ref, Mapping):
            kind, key = str(ref.get("kind", "")), object_key(ref)
        else:
            kind = str(getattr(ref, "kind", ""))
            kind = getattr(kind, "kind", kind)  # a Kind object
            namespace = getattr(ref, "namespace", None)
            name = str(getattr(ref, "name", ""))
            key = f"{namespace}/{name}" if namespace else name
        if kind == "Pod":
            self._remove_pod(key)
        elif kind == "Node":
            self.nodes.pop(key, None)
            self.node_manifests.pop(key, None)
            self._invalidate(key, rematch=True)
        elif kind == "NodeClaim":
            self.nodeclaims.pop(key, None)
            self.nodeclaim_manifests.pop(key, None)
            self._claim_places.pop(key, None)
            self._deleting_claims.discard(key)
            self._invalidate(key, rematch=True)
        elif kind == "NodePool":
            self.nodepools.pop(key, None)
            self.nodepool_manifests.pop(key, None)
        elif kind in _RAW_KINDS:
            getattr(self, _RAW_KINDS[kind]).pop(key, None)
            self._after_raw_change(kind)

    def _after_raw_change(self, kind: str) -> None:
        if kind == "DaemonSet":
            self._daemon_pods = None
        elif kind in ("RuntimeClass", "PriorityClass"):
            self._overheads = None
            for key, manifest in list(self.pod_manifests.items()):
                self._upsert_pod(key, manifest)
        elif kind in ("PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode"):
            self._volume_version += 1
            self._invalidate(None)

    def _upsert_pod(self, key: str, manifest: Manifest) -> None:
        kept = self._kept(self.pod_manifests, key, self.pods.get(key))
        pod = Pod.from_manifest(
            manifest, runtime_class_overhead=self._runtime_overheads(), memo=self._spec_memo, kept=kept
        )
        if not pod.priority and pod.priority_class_name in self.priority_classes:
            pod = replace(pod, priority=int(self.priority_classes[pod.priority_class_name].get("value") or 0))
        self._remove_pod(key)
        self.pods[key] = pod
        self.pod_manifests[key] = manifest
        if pod.is_provisionable():
            self._provisionable[key] = pod
            self._pending = None
        if not pod.node_name and pod.is_active:
            self._unbound[key] = None
        if pod.node_name:
            self._pods_by_node.setdefault(pod.node_name, {})[key] = pod
            self._invalidate_node(pod.node_name)

    def _remove_pod(self, key: str) -> None:
        old = self.pods.pop(key, None)
        self.pod_manifests.pop(key, None)
        if self._provisionable.pop(key, None) is not None:
            self._pending = None
        self._unbound.pop(key, None)
        if old is not None and old.node_name:
            self._pods_by_node.get(old.node_name, {}).pop(key, None)
            self._invalidate_node(old.node_name)

    def _invalidate_node(self, node_name: str) -> None:
        self._pod_versions[node_name] = self._pod_versions.get(node_name, 0) + 1
        self._invalidate(node_name)

    def _invalidate(self, name: str | None, *, rematch: bool = False) -> None:
        """The StateNode of ``name`` (a Node's or NodeClaim's name) may have changed; ``rematch``: which Node goes
        with which NodeClaim may have too; None: any StateNode may have (volumes)."""
        self._state_nodes = None
        if name is None:
            self._dirty = None
        elif self._dirty is not None:
            self._dirty.add(name)
            self._dirty.update(self._keys_of_claim.get(name, ()))  # a NodeClaim's StateNode: by its Node's name
        if rematch and name is not None:
            self._rematch.add(name)

    def _invalidate_flagged(self, names: Iterable[str]) -> None:
        """Flags are set by node or NodeClaim name: the StateNodes they belong to may have changed."""
        for name in names:
            self._invalidate(name)

    def _runtime_overheads(self) -> dict[str, Resources]:
        """RuntimeClass name -> its pod overhead (read again only after a RuntimeClass changed)."""
        if self._overheads is None:
            self._overheads = self._read_overheads()
        return self._overheads

    def _read_overheads(self) -> dict[str, Resources]:
        overheads = {}
        for name, manifest in self.runtime_classes.items():
            fixed = (manifest.get("overhead") or {}).get("podFixed")
            if fixed:
                overheads[name] = Resources.from_manifest(fixed, path=f"RuntimeClass {name}: overhead.podFixed")
        return overheads

    # -- flags set by the engine's callers -----------------------------------------------------

    def mark_for_deletion(self, *names: str) -> None:
        self._marked.update(names)
        self._invalidate_flagged(names)

    def unmark_for_deletion(self, *names: str) -> None:
        self._marked.difference_update(names)
        self._invalidate_flagged(names)

    def nominate(self, name: str, until: datetime) -> None:
        """Protect a node (by node or NodeClaim name) from disruption until ``until``."""
        self._nominated[name] = until
        self._invalidate_flagged((name,))

    # -- views ---------------------------------------------------------------------------------

    def state_nodes(self) -> list[StateNode]:
        """Every node and in-flight NodeClaim, ordered by name."""
        if self._state_nodes is None:
            self._state_nodes = self._build_state_nodes()
        return list(self._state_nodes.values())

    def nodes_memo(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per version of the nodes and the pods bound to them (any change to either
        makes a new version): for views over the whole cluster that many scheduling runs share."""
        if self._state_nodes is None:
            self._state_nodes = self._build_state_nodes()
        if self._nodes_memo is None or self._nodes_memo[0] is not self._state_nodes:
            self._nodes_memo = (self._state_nodes, {})
        memo = self._nodes_memo[1]
        if name not in memo:
            memo[name] = compute()
        return memo[name]

    def state_node(self, name: str) -> StateNode | None:
        """By node name or NodeClaim name."""
        if self._state_nodes is None:
            self._state_nodes = self._build_state_nodes()
        found = self._state_nodes.get(name)
        if found is not None:
            return found
        return next((n for n in self._state_nodes.values() if n.nodeclaim_name == name), None)

    def _build_state_nodes(self) -> dict[str, StateNode]:
        previous, dirty = self._last_nodes, self._dirty
        if previous is None or dirty is None:
            result = self._build_all_state_nodes()
            changed = frozenset(name for name, node in result.items()
                                if previous is None or previous.get(name) is not node)
            if previous is not None:
                changed |= previous.keys() - result.keys()
        else:
            if self._rematch:
                dirty |= self._rematch_some(self._rematch)
            result, changed = self._rebuild_state_nodes(previous, dirty)
        if previous is not None:
            for name in changed:  # the versions replaced or dropped: their memos' cycles would keep them alive
                old = previous.get(name)
                if old is not None and result.get(name) is not old:
                    old.forget_memos()
        self._last_nodes, self._dirty, self._rematch = result, set(), set()
        self._generation += 1
        self._journal.append((self._generation, changed))
        del self._journal[:-_JOURNAL_LENGTH]
        return result

    def _match_claims(self) -> set[str]:
        """Match every Node with its NodeClaim (by provider ID, else by node name; the rest are in-flight
        StateNodes of their own): ``_claim_of`` (StateNode name -> NodeClaim name or None, in ``nodes`` then
        ``nodeclaims`` order) and ``_keys_of_claim``. Returns the StateNode names whose match changed, came or went."""
        claims_by_provider = {c.provider_id: c for c in self.nodeclaims.values() if c.provider_id}
        claims_by_node = {c.node_name: c for c in self.nodeclaims.values() if c.node_name}
        claim_of: dict[str, str | None] = {}
        keys_of_claim: dict[str, list[str]] = {}
        for name, node in self.nodes.items():
            claim = claims_by_provider.get(node.provider_id) if node.provider_id else None
            claim = claim or claims_by_node.get(name)
            if claim is not None:
                keys_of_claim.setdefault(claim.name, []).append(name)
            claim_of[name] = claim.name if claim is not None else None
        for name in self.nodeclaims:
            if name not in keys_of_claim and name not in claim_of:
                claim_of[name] = name
                keys_of_claim[name] = [name]
        before = self._claim_of
        moved = {name for name, claim in claim_of.items() if before.get(name, "") != claim}
        moved.update(name for name in before if name not in claim_of)
        self._claim_of, self._keys_of_claim = claim_of, keys_of_claim
        self._match_index = _MatchIndex.of(self.nodes, self.nodeclaims)
        return moved

    def _rematch_some(self, touched: set[str]) -> set[str]:
        """``_match_claims`` for the Nodes and NodeClaims named ``touched`` (written or removed since the last
        match) and the names their match can move, not every name: the same ``_claim_of`` (up to its order,
        which only a full build reads) and ``_keys_of_claim``. Two NodeClaims found by one provider ID or node
        name (which one wins depends on their order) match everything again."""
        index = self._match_index
        for name in touched:
            index.update(name, self.nodes.get(name), self.nodeclaims.get(name))
        claim_of, keys_of_claim = self._claim_of, self._keys_of_claim
        names = set(touched)
        for name in touched:
            names.update(keys_of_claim.get(name, ()))  # the Nodes a written or removed NodeClaim had
            claim = self.nodeclaims.get(name)
            if claim is not None:  # and the Nodes it may have now
                names.update(index.nodes_by_provider.get(claim.provider_id, ()) if claim.provider_id else ())
                if claim.node_name in self.nodes:
                    names.add(claim.node_name)
        found: dict[str, str | None] = {}
        for name in names:
            node = self.nodes.get(name)
            if node is not None:
                matched = index.claim_for(name, node)
                if matched is _AMBIGUOUS:
                    return self._match_claims()
                found[name] = cast(str | None, matched)
        # The NodeClaims whose Nodes may have changed, and the names that may be in-flight NodeClaims' own.
        claims = {c for name in names if (c := claim_of.get(name)) is not None}
        claims.update(c for c in found.values() if c is not None)
        claims.update(name for name in names if name in self.nodeclaims)
        moved: set[str] = set()
        for claim_name in claims:
            kept = [n for n in keys_of_claim.get(claim_name, ()) if n not in names and n in self.nodes
                    and claim_of.get(n) == claim_name]
            keys = kept + sorted(n for n, c in found.items() if c == claim_name)
            if keys:
                keys_of_claim[claim_name] = keys
            elif claim_name in self.nodeclaims and claim_name not in self.nodes:
                keys_of_claim[claim_name] = [claim_name]
                found[claim_name] = claim_name
            else:
                keys_of_claim.pop(claim_name, None)
        for name in names | claims:
            if name not in names and name in self.nodes:
                continue  # an unaffected Node of that name: its own match stays
            if name in found:
                if claim_of.get(name, "") != found[name]:
                    moved.add(name)
                claim_of[name] = found[name]
            elif name in claim_of:
                del claim_of[name]
                moved.add(name)
        return moved

    def _build_all_state_nodes(self) -> dict[str, StateNode]:
        self._match_claims()
        self._rematch = set()
        pvc_drivers = self.pvc_drivers()
        result: dict[str, StateNode] = {}
        for name, claim_name in self._claim_of.items():
            claim = self.nodeclaims[claim_name] if claim_name is not None else None
            result[name] = self._state_node(name, self.nodes.get(name), claim, pvc_drivers)
        self._previous = {
            name: (node, self._pod_versions.get(name, 0), self._volume_version) for name, node in result.items()
        }
        # Forget versions of names that are gone (a name that comes back starts without a previous node).
        self._pod_versions = {
            name: version for name, version in self._pod_versions.items()
            if name in result or self._pods_by_node.get(name)
        }
        return dict(sorted(result.items()))

    def _rebuild_state_nodes(
        self, previous: dict[str, StateNode], dirty: set[str]
    ) -> tuple[dict[str, StateNode], frozenset[str]]:
        """The last build with the StateNodes of ``dirty`` names brought up to date (built, rebuilt or dropped),
        matched as ``_claim_of`` says."""
        result = dict(previous)
        changed: list[str] = []
        pvc_drivers: dict[str, str] | None = None
        reorder = False
        for name in dirty:
            if name not in self._claim_of:
                if result.pop(name, None) is not None:
                    self._previous.pop(name, None)  # a name that comes back starts without a previous node
                    changed.append(name)
                continue  # or pods bound to a name that is no node
            claim_name = self._claim_of[name]
            claim = self.nodeclaims[claim_name] if claim_name is not None else None
            if pvc_drivers is None:
                pvc_drivers = self.pvc_drivers() if self.persistent_volume_claims else {}
            found = self._state_node(name, self.nodes.get(name), claim, pvc_drivers)
            self._previous[name] = (found, self._pod_versions.get(name, 0), self._volume_version)
            if found is not result.get(name):
                reorder = reorder or name not in result
                result[name] = found
                changed.append(name)
        if reorder:
            result = dict(sorted(result.items()))
        return result, frozenset(changed)

    @property
    def nodes_generation(self) -> int:
        """Counts versions of the StateNodes (see ``node_changes_since``)."""
        if self._state_nodes is None:
            self._state_nodes = self._build_state_nodes()
        return self._generation

    def node_changes_since(self, generation: int) -> frozenset[str] | None:
        """Every name whose StateNode is another object now than at ``generation`` (a ``nodes_generation``), or
        came or went since (a name may be in it and be unchanged after all), or None when that is too long ago
        to say: views of every node kept across versions update those names only."""
        current = self.nodes_generation
        if generation == current:
            return frozenset()
        if generation < current - len(self._journal):
            return None
        return frozenset().union(*(names for seen, names in self._journal if seen > generation))

    def _state_node(
        self, name: str, node: Node | None, claim: NodeClaim | None, pvc_drivers: Mapping[str, str]
    ) -> StateNode:
        claim_name = claim.name if claim is not None else name
        nominated = self._nominated.get(name)
        if claim_name != name and claim_name in self._nominated:
            other = self._nominated[claim_name]
            nominated = other if nominated is None else max(nominated, other)
        marked = name in self._marked or claim_name in self._marked
        previous = self._previous.get(name)
        if previous is not None:
            old, pods_version, volume_version = previous
            # Node and NodeClaim objects are replaced on every change, so identity means unchanged.
            if (
                old.node is node and old.nodeclaim is claim and old.marked_for_deletion_flag == marked
                and old.nominated_until == nominated and pods_version == self._pod_versions.get(name, 0)
                and volume_version == self._volume_version
            ):
                return old
        return build_state_node(
            name,
            node,
            claim,
            self._pods_by_node.get(name, {}),
            marked=marked,
            nominated_until=nominated,
            pvc_drivers=pvc_drivers,
            volume_limits=self._volume_limits(name),
        )

    def pvc_drivers(self) -> dict[str, str]:
        """PVC key -> CSI driver (from the bound PV, else the StorageClass provisioner)."""
        drivers = {}
        for key, pvc in self.persistent_volume_claims.items():
            spec = pvc.get("spec") or {}
            volume = self.persistent_volumes.get(str(spec.get("volumeName") or ""))
            driver = ((volume or {}).get("spec") or {}).get("csi", {}).get("driver") if volume else None
            if not driver and spec.get("storageClassName"):
                driver = (self.storage_classes.get(str(spec["storageClassName"])) or {}).get("provisioner")
            if driver:
                drivers[key] = str(driver)
        return drivers

    def _volume_limits(self, node_name: str) -> dict[str, int]:
        csi = self.csi_nodes.get(node_name)
        limits = {}
        for driver in ((csi or {}).get("spec") or {}).get("drivers") or []:
            count = (driver.get("allocatable") or {}).get("count")
            if count is not None:
                limits[str(driver.get("name"))] = int(count)
        return limits

    def deleting_nodeclaim_manifests(self) -> list[Manifest]:
        """The NodeClaims with a deletionTimestamp, in ``nodeclaim_manifests`` order (kept indexed as written)."""
        names = sorted(self._deleting_claims, key=self._claim_places.__getitem__)
        return [self.nodeclaim_manifests[name] for name in names]

    def pending_pods(self) -> list[Pod]:
        """Pods Karpenter provisions for (see ``Pod.is_provisionable``), in a stable order (by key)."""
        if self._pending is None:
            self._pending = [pod for _, pod in sorted(self._provisionable.items())]
        return list(self._pending)

    def unbound_pod_manifests(self) -> list[Manifest]:
        """Manifests of the pods bound to no node that are neither finished nor terminating, in
        ``pod_manifests`` order."""
        return [self.pod_manifests[key] for key in self._unbound]

    def pods_on(self, node_name: str) -> list[Pod]:
        return list(self._pods_by_node.get(node_name, {}).values())

    def bound_pods(self) -> Iterable[Pod]:
        for pods in self._pods_by_node.values():
            yield from pods.values()

    def bound_node_names(self) -> Iterable[str]:
        """The node names pods are bound to, in the order ``bound_pods`` visits them."""
        return self._pods_by_node.keys()

    def state_nodes_by_name(self) -> Mapping[str, StateNode]:
        """Every StateNode by its name (read-only), as ``state_nodes`` lists them."""
        if self._state_nodes is None:
            self._state_nodes = self._build_state_nodes()
        return self._state_nodes

    def daemonset_pods(self) -> list[Pod]:
        """One representative pod per DaemonSet, built from its template (for overhead on new nodes)."""
        if self._daemon_pods is None:
            self._daemon_pods = [self._daemon_pod(key, ds) for key, ds in sorted(self.daemonsets.items())]
        return list(self._daemon_pods)

    def _daemon_pod(self, key: str, daemonset: Manifest) -> Pod:
        metadata = daemonset.get("metadata") or {}
        template = (daemonset.get("spec") or {}).get("template") or {}
        namespace = str(metadata.get("namespace") or "default")
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                **(template.get("metadata") or {}),
                "name": f"{metadata.get('name', '')}-template",
                "namespace": namespace,
                "uid": f"daemonset-template/{key}",
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": metadata.get("name", ""),
                     "uid": metadata.get("uid", ""), "controller": True}
                ],
            },
            "spec": template.get("spec") or {},
        }
        try:
            return Pod.from_manifest(manifest, runtime_class_overhead=self._runtime_overheads())
        except ManifestError as err:
            raise ManifestError(f"DaemonSet {key}: spec.template: {err}") from None

    def nodepool_usage(self, nodepool: str) -> Resources:
        """Summed capacity of the pool's nodes (incl. in-flight claims), plus ``nodes`` = their count."""
        total: dict[str, int] = {}
        count = 0
        for node in self.state_nodes():
            if node.nodepool != nodepool:
                continue
            count += 1
            for resource, value in node.capacity.items():
                total[resource] = total.get(resource, 0) + value
        total[NODES] = count * 1000
        return Resources(total)

    def stored_controller(self, kind: str, group: str, namespace: str, name: str) -> Manifest | None:
        """A stored Deployment, ReplicaSet or StatefulSet (``model.pdb_status``'s lookup): a budget counts its
        expected pods from their scale."""
        store = {"Deployment": self.deployments, "ReplicaSet": self.replicasets, "StatefulSet": self.statefulsets}
        found = store[kind].get(f"{namespace}/{name}") if kind in store else None
        if found is None or str(found.get("apiVersion", "")).rpartition("/")[0] != group:
            return None
        return found

    def nodepool_node_counts(self) -> dict[str, int]:
        """NodePool -> how many nodes (and in-flight claims) it has (kept up to date by the nodes that change)."""
        return node_counts(self, "state.nodepool_node_counts", _nodepool_of)  # type: ignore[return-value]

    def nodeclass(self, nodepool: NodePool) -> Manifest | None:
        return self.nodeclasses.get(nodepool.node_class_ref.get("name", ""))

    def nodepool_of(self, node: StateNode) -> NodePool | None:
        return self.nodepools.get(node.nodepool)

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        manifest = self.namespaces.get(namespace)
        labels = dict(((manifest or {}).get("metadata") or {}).get("labels") or {})
        labels.setdefault("kubernetes.io/metadata.name", namespace)
        return labels

    def managed_nodes(self) -> list[StateNode]:
        return [n for n in self.state_nodes() if n.managed]

    def is_managed_label(self, labels: Mapping[str, str]) -> bool:
        return bool(labels.get(wk.NODEPOOL))


def _nodepool_of(node: StateNode) -> tuple[str, ...]:
    return (node.nodepool,) if node.nodepool else ()


def _template(daemonset: Mapping[str, Any]) -> Any:
    return (daemonset.get("spec") or {}).get("template")


_AMBIGUOUS = object()  # two NodeClaims claim the same provider ID or node name


class _MatchIndex:
    """NodeClaims by provider ID and by node name, and Nodes by provider ID, as ``_claim_of`` was matched."""

    __slots__ = ("_claim_keys", "_node_keys", "claims_by_node", "claims_by_provider", "nodes_by_provider")

    def __init__(self) -> None:
        self.claims_by_provider: dict[str, set[str]] = {}
        self.claims_by_node: dict[str, set[str]] = {}
        self.nodes_by_provider: dict[str, set[str]] = {}
        self._claim_keys: dict[str, tuple[str, str]] = {}  # NodeClaim -> (provider ID, node name) indexed
        self._node_keys: dict[str, str] = {}  # Node -> provider ID indexed

    @classmethod
    def of(cls, nodes: Mapping[str, Node], claims: Mapping[str, NodeClaim]) -> _MatchIndex:
        index = cls()
        for name in {**claims, **nodes}:
            index.update(name, nodes.get(name), claims.get(name))
        return index

    def update(self, name: str, node: Node | None, claim: NodeClaim | None) -> None:
        """Index ``name``'s Node and NodeClaim as they are now (None: there is none of that kind by this name)."""
        old = self._claim_keys.pop(name, None)
        if old is not None:
            _unindex(self.claims_by_provider, old[0], name)
            _unindex(self.claims_by_node, old[1], name)
        if claim is not None:
            self._claim_keys[name] = (claim.provider_id, claim.node_name)
            if claim.provider_id:
                self.claims_by_provider.setdefault(claim.provider_id, set()).add(name)
            if claim.node_name:
                self.claims_by_node.setdefault(claim.node_name, set()).add(name)
        provider = self._node_keys.pop(name, None)
        if provider is not None:
            _unindex(self.nodes_by_provider, provider, name)
        if node is not None:
            self._node_keys[name] = node.provider_id
            if node.provider_id:
                self.nodes_by_provider.setdefault(node.provider_id, set()).add(name)

    def claim_for(self, name: str, node: Node) -> str | object | None:
        """The NodeClaim the Node named ``name`` goes with (``_match_claims``' rule), or ``_AMBIGUOUS``."""
        if node.provider_id:
            found = self.claims_by_provider.get(node.provider_id)
            if found:
                return next(iter(found)) if len(found) == 1 else _AMBIGUOUS
        found = self.claims_by_node.get(name)
        if found:
            return next(iter(found)) if len(found) == 1 else _AMBIGUOUS
        return None


def _unindex(index: dict[str, set[str]], key: str, name: str) -> None:
    names = index.get(key)
    if names is not None:
        names.discard(name)
        if not names:
            del index[key]
