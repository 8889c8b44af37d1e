"""Reading the inputs of ``plan``/``explain``/``status``: snapshots and proposed NodePools.

A snapshot file is either a scenario document (what ``snapshot`` writes) or the output of
``kubectl get ... -A -o yaml`` (``kind: List`` documents, several may be concatenated). Proposed
NodePools come from a YAML file of NodePool/EC2NodeClass manifests or from a Pulumi stack file's
``adze:nodePools``/``adze:nodeClasses``, validated by the same model the infrastructure uses.
Every problem is an ``InsightError`` naming the file and key path.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from reconciler import yamlio
from reconciler.disruption.adoption import adopt_nodeclaims
from reconciler.insight.catalog import preset_catalog
from reconciler.insight.errors import InsightError
from reconciler.insight.snapshot import observed_region, observed_zones, sanitize_objects
from reconciler.model.meta import ManifestError, format_time
from reconciler.model.shape import check_document_bounds, check_manifest_shape
from reconciler.settings import SettingsError, parse_feature_gates
from reconciler.sim.scenario import DEFAULT_CLOCK, CheckedObjects, Scenario, ScenarioError, parse_scenario

NODEPOOL_KEY = ("karpenter.sh/v1", "NodePool")
NODECLASS_KEY = ("karpenter.k8s.aws/v1", "EC2NodeClass")
NODEOVERLAY_KEY = ("karpenter.sh/v1alpha1", "NodeOverlay")
# ``--remove KIND/NAME``: the kinds a proposal can remove (a bare NAME is resolved against the cluster).
REMOVABLE_KINDS = {"nodepool": "NodePool", "nodeoverlay": "NodeOverlay"}
_SCENARIO_KEYS = frozenset({"objects", "catalog", "steps", "settings"})


@dataclass(slots=True)
class Snapshot:
    """A cluster snapshot as a scenario document (no steps), and where it came from."""

    document: dict[str, Any]
    source: str
    dropped: dict[str, int] = field(default_factory=dict)
    # Objects validated once (load_snapshot) and not again by each scenario built from the snapshot.
    checked: CheckedObjects = field(default_factory=CheckedObjects, repr=False, compare=False)

    @property
    def name(self) -> str:
        return str(self.document.get("name") or "snapshot")

    @property
    def objects(self) -> list[dict[str, Any]]:
        return list(self.document.get("objects") or [])

    @property
    def clock(self) -> datetime:
        """When the snapshot was taken (``settings.clock``): the moment a proposal applied to it takes effect."""
        try:
            return parse_scenario({**self.document, "objects": [], "steps": []}).clock
        except ScenarioError as err:
            raise InsightError(f"{self.source}: {err}") from None

    def with_catalog(self, catalog: Mapping[str, Any]) -> Snapshot:
        """The same objects priced with another catalogue (``--catalog``, ``--prices``): not read again."""
        changed = Snapshot({**self.document, "catalog": dict(catalog)}, self.source, self.dropped, self.checked)
        changed.scenario()  # the catalogue and its prices are validated now
        return changed

    def at(self, clock: str) -> Snapshot:
        """The same snapshot evaluated at another time (``--clock``)."""
        settings = {**(self.document.get("settings") or {}), "clock": clock}
        moved = Snapshot({**self.document, "settings": settings}, self.source, self.dropped, self.checked)
        try:
            parse_scenario({**moved.document, "objects": []})
        except ScenarioError as err:
            raise InsightError(f"--clock: {err}") from None
        return moved

    def scenario(self, *, name: str | None = None, objects: list[dict[str, Any]] | None = None) -> Scenario:
        """The snapshot as a validated ``Scenario`` (optionally renamed / with other objects)."""
        document = dict(self.document)
        document["steps"] = []
        if name is not None:
            document["name"] = name
        if objects is not None:
            document["objects"] = objects
        try:
            scenario = parse_scenario(document, source=self.source, default_name=self.name, checked=self.checked)
        except ScenarioError as err:
            raise InsightError(f"{self.source}: {err}") from None
        # A real cluster: a NodePool without its EC2NodeClass launches nothing, as in Karpenter. A dump with
        # no EC2NodeClass at all is taken as one that left them out (or a simulated cluster), not as a
        # cluster where nothing can launch.
        if any(o.get("kind") == "EC2NodeClass" for o in document.get("objects") or ()):
            scenario.settings = dataclasses.replace(scenario.settings, require_nodeclass=True)
        if self.overlay_gate is None and any(o.get("kind") == "NodeOverlay" for o in document.get("objects") or ()):
            gates = {**scenario.settings.feature_gates, "NodeOverlay": True}
            scenario.settings = dataclasses.replace(scenario.settings, feature_gates=gates)
        return scenario

    @property
    def overlay_gate(self) -> bool | None:
        """The ``NodeOverlay`` gate as the snapshot's ``settings.featureGates`` set it; None when they do not
        say (a kubectl dump or a live snapshot cannot see the controller's gates). Unsaid, the gate is taken
        as on wherever NodeOverlays are present: the cluster has them because it uses them, and a plan that
        ignored them would price every node at list price and never preview an overlay change."""
        gates = (self.document.get("settings") or {}).get("featureGates")
        if gates is None or "NodeOverlay" not in (gates if isinstance(gates, Mapping) else str(gates)):
            return None
        try:
            return parse_feature_gates(gates, name="settings.featureGates")["NodeOverlay"]
        except SettingsError as err:
            raise InsightError(f"{self.source}: {err}") from None


def _read_yaml_documents(path: str | Path) -> list[Any]:
    try:
        yamlio.check_utf8(path)
        if _first_character(path) in ("{", "["):
            # `kubectl get -o json` dumps and `snapshot -o x.json`: JSON is YAML, but json parses it ~5x faster.
            try:
                document = json.loads(Path(path).read_text(encoding="utf-8"))
            except ValueError:
                pass  # flow-style YAML after all; the YAML parser reports what is wrong
            else:
                return [] if document is None else [document]
        return [doc for doc in yamlio.load_file(path) if doc is not None]
    except OSError as err:
        raise InsightError(f"{path}: cannot read ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise InsightError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InsightError(f"{path}: {getattr(err, 'problem', None) or 'invalid YAML'}{where}") from None
    except RecursionError:
        raise InsightError(f"{path}: nested too deeply to read") from None


def _first_character(path: str | Path) -> str:
    """The file's first character that is not white space ("" if none), read a chunk at a time."""
    with open(path, encoding="utf-8") as file:
        while chunk := file.read(1 << 16):
            if stripped := chunk.lstrip():
                return stripped[0]
    return ""


def _manifests(documents: list[Any], path: str, *, check_shapes: bool = False) -> list[dict[str, Any]]:
    """Flatten ``kind: List`` documents and single manifests into one list of manifests (bounded in depth and
    size; ``check_shapes``: the fields the engine reads have their types, checked before anything reads them)."""
    manifests: list[dict[str, Any]] = []
    for doc_index, document in enumerate(documents):
        where = f"{path}: document {doc_index + 1}"
        if not isinstance(document, Mapping):
            raise InsightError(f"{where}: expected a Kubernetes object or List")
        try:
            check_document_bounds(document, where)
        except ManifestError as err:
            raise InsightError(str(err)) from None
        items = document.get("items") if str(document.get("kind", "")).endswith("List") else [document]
        if not isinstance(items, list):
            raise InsightError(f"{where}.items: expected a list of objects")
        for index, item in enumerate(items):
            item_where = f"{where}.items[{index}]" if items is not document else where
            if not isinstance(item, Mapping) or not item.get("kind") or not item.get("apiVersion"):
                raise InsightError(f"{item_where}: expected an object with apiVersion and kind")
            if not isinstance(item.get("metadata"), Mapping) or not item["metadata"].get("name"):
                raise InsightError(f"{item_where}.metadata.name: required")
            if check_shapes:
                try:
                    check_manifest_shape(item, item_where)
                except ManifestError as err:
                    raise InsightError(str(err)) from None
            manifests.append(dict(item))
    return manifests


def load_snapshot(path: str | Path, *, catalog: Mapping[str, Any] | None = None) -> Snapshot:
    """Read a snapshot scenario document or ``kubectl get -o yaml`` output.

    ``catalog`` (a scenario ``catalog:`` section) replaces the snapshot's own; a kubectl dump has
    none, so it gets the bundled preset limited to the zones its nodes run in.
    """
    source = str(path)
    documents = _read_yaml_documents(path)
    if not documents:
        raise InsightError(f"{source}: empty file (expected a snapshot or kubectl get -o yaml output)")
    first = documents[0]
    if len(documents) == 1 and isinstance(first, Mapping) and _SCENARIO_KEYS & set(first):
        document = dict(first)
        if catalog is not None:
            document["catalog"] = dict(catalog)
        snapshot = Snapshot(document, source)
    else:
        manifests = _manifests(documents, source, check_shapes=True)
        _check_is_a_cluster(manifests, source)
        try:
            objects, dropped = sanitize_objects(manifests)
        except (TypeError, AttributeError, ValueError, KeyError) as err:
            # A shape the checks above do not cover: still one line naming the file, never a traceback.
            raise InsightError(f"{source}: malformed object ({type(err).__name__}: {err})") from None
        stem = Path(path).stem
        document = {
            "name": stem,
            "settings": {"clock": format_time(latest_timestamp(objects))},
            "catalog": dict(catalog)
            if catalog is not None
            else preset_catalog(observed_zones(objects), observed_region(objects)),
            "objects": objects,
            "steps": [],
        }
        snapshot = Snapshot(document, source, dropped)
        for manifest in objects:  # cut from the dump's items, whose bounds and shapes _manifests checked
            snapshot.checked.add_from_checked_source(manifest)
    # Claims Karpenter stamped are re-stamped against the cluster's own NodePools, as Adze's controller does on
    # taking over, so a proposal's template change drifts them.
    adopt_nodeclaims(snapshot.document.setdefault("objects", []))
    snapshot.scenario()  # validate now: a bad snapshot is reported before any work starts
    return snapshot


def _check_is_a_cluster(manifests: Sequence[Mapping[str, Any]], source: str) -> None:
    """A dump is a cluster's: it lists its Nodes. Anything else (a NodePools file, one Deployment) given as a
    snapshot would be planned as an empty cluster, and every answer would look safe."""
    if any(m.get("kind") == "Node" for m in manifests):
        return
    kinds: dict[str, int] = {}
    for manifest in manifests:
        kinds[str(manifest.get("kind"))] = kinds.get(str(manifest.get("kind")), 0) + 1
    found = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items())) or "no object"
    hint = "; a NodePool file goes to --nodepools" if "NodePool" in kinds or "EC2NodeClass" in kinds else ""
    raise InsightError(
        f"{source}: not a cluster snapshot: it holds {found} and no Node (expected what `snapshot` writes, or "
        f"`kubectl get nodes,pods,... -A -o yaml` output){hint}"
    )


def latest_timestamp(objects: list[dict[str, Any]]) -> datetime:
    """The newest time recorded in the objects: when a ``kubectl get`` dump was taken, near enough.

    Deterministic (unlike the wall clock), so the same dump always gives the same preview.
    """
    latest = DEFAULT_CLOCK
    found = False
    for manifest in objects:
        metadata = manifest.get("metadata") or {}
        stamps = [metadata.get("creationTimestamp")]
        status = manifest.get("status") or {}
        stamps.append(status.get("lastPodEventTime"))
        stamps.extend(
            c.get("lastTransitionTime") for c in status.get("conditions") or [] if isinstance(c, Mapping)
        )
        for stamp in stamps:
            moment = _parse_time(stamp)
            if moment is not None and (not found or moment > latest):
                latest, found = moment, True
    return latest


def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(slots=True)
class ProposedConfig:
    """The NodePools (and EC2NodeClasses, NodeOverlays) a change would leave in the cluster."""

    nodepools: list[dict[str, Any]]
    nodeclasses: list[dict[str, Any]]
    source: str
    # True: the NodePools given are all there will be (a stack, ``--replace-all``): any other is removed.
    # False: they are merged over the cluster's (changed and added only); ``removed`` names the pools to drop.
    # NodeOverlays are always merged (a stack declares none): only ``removed`` drops one.
    complete: bool = True
    # ``--remove`` as given: ``NAME`` (a NodePool or NodeOverlay of the cluster, whichever has it),
    # ``nodepool/NAME`` or ``nodeoverlay/NAME`` (``removal_target`` reads them).
    removed: tuple[str, ...] = ()
    region: str = ""  # where the NodePools are deployed (a stack's ``aws:region``), when the source says
    nodeoverlays: list[dict[str, Any]] = field(default_factory=list)


def removal_target(entry: str) -> tuple[str | None, str]:
    """(kind or None when not said, name) of one ``--remove`` entry; an unknown kind prefix is an error."""
    prefix, slash, name = entry.partition("/")
    if not slash:
        return None, entry
    kind = REMOVABLE_KINDS.get(prefix.lower())
    if kind is None or not name:
        raise InsightError(f"--remove {entry}: expected NAME, nodepool/NAME or nodeoverlay/NAME")
    return kind, name


def load_nodepools_files(
    paths: Sequence[str | Path], *, complete: bool = False, removed: Sequence[str] = ()
) -> ProposedConfig:
    """``--nodepools`` given any number of times, files or directories (their ``*.yaml``/``*.yml``, sorted).

    An object declared in two places is an error naming both; a pool both given and removed too."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
            if not found:
                raise InsightError(f"{path}: no .yaml or .yml files in the directory")
            files.extend(found)
        else:
            files.append(path)
    pools: list[dict[str, Any]] = []
    classes: list[dict[str, Any]] = []
    overlays: list[dict[str, Any]] = []
    origin: dict[tuple[str, str], str] = {}
    for path in files:
        loaded = load_nodepools_file(path, require_nodepool=False)
        parts = (("NodePool", loaded.nodepools, pools), ("EC2NodeClass", loaded.nodeclasses, classes),
                 ("NodeOverlay", loaded.nodeoverlays, overlays))
        for kind, items, target in parts:
            for manifest in items:
                name = manifest["metadata"]["name"]
                if (kind, name) in origin:
                    if manifest == next(m for m in target if m["metadata"]["name"] == name):
                        continue  # the same object repeated (Karpenter's examples each carry their class)
                    raise InsightError(
                        f"{kind} {name!r} is declared differently in {origin[kind, name]} and {path}"
                    )
                origin[kind, name] = str(path)
                target.append(manifest)
    for entry in removed:
        said, name = removal_target(entry)
        for given in ("NodePool", "NodeOverlay"):
            if said in (None, given) and (given, name) in origin:
                raise InsightError(f"--remove {entry}: the {given} is also given in {origin[given, name]}")
    if complete and not pools:
        raise InsightError("--replace-all: the files declare no NodePool, so every NodePool would be removed")
    source = ", ".join(str(p) for p in files) or "--remove " + " ".join(removed)
    return ProposedConfig(pools, classes, source, complete=complete, removed=tuple(removed), nodeoverlays=overlays)


def _foreign_nodeclass(manifest: Mapping[str, Any]) -> bool:
    group = str(manifest.get("apiVersion", "")).partition("/")[0]
    return str(manifest.get("kind", "")).endswith("NodeClass") and group not in ("karpenter.k8s.aws", "karpenter.sh")


def load_nodepools_file(path: str | Path, *, require_nodepool: bool = True) -> ProposedConfig:
    """NodePool, EC2NodeClass and NodeOverlay manifests (multi-document YAML or a List), each validated."""
    from reconciler.api import ValidationFailure, parse_object

    source = str(path)
    manifests = _manifests(_read_yaml_documents(path), source)
    pools: list[Any] = []
    classes: list[Any] = []
    overlays: list[Any] = []
    target = {NODEPOOL_KEY: pools, NODECLASS_KEY: classes, NODEOVERLAY_KEY: overlays}
    for index, manifest in enumerate(manifests):
        key = (manifest.get("apiVersion"), manifest.get("kind"))
        name = manifest["metadata"]["name"]
        if _foreign_nodeclass(manifest):
            # Another provider's class (EKS Auto Mode's eks.amazonaws.com NodeClass) beside its NodePools:
            # Adze does not serve it, and the plan reports each NodePool naming it as not Ready.
            continue
        if key not in (NODEPOOL_KEY, NODECLASS_KEY, NODEOVERLAY_KEY):  # compared, not hashed: any value may be here
            raise InsightError(
                f"{source}: object {index + 1} ({manifest.get('kind')} {name}): only karpenter.sh/v1 "
                "NodePool, karpenter.k8s.aws/v1 EC2NodeClass and karpenter.sh/v1alpha1 NodeOverlay belong in a "
                "NodePools file"
            )
        try:
            parse_object(manifest)
        except ValidationFailure as failure:
            first = failure.problems[0]
            raise InsightError(f"{source}: {manifest['kind']} {name}: {first}") from None
        clean = {k: v for k, v in manifest.items() if k != "status"}
        target[key].append(clean)
    if not pools and not classes and not overlays:
        raise InsightError(f"{source}: no karpenter.sh/v1 NodePool, karpenter.k8s.aws/v1 EC2NodeClass or "
                           "karpenter.sh/v1alpha1 NodeOverlay in the file")
    if not pools and require_nodepool:
        raise InsightError(f"{source}: no karpenter.sh/v1 NodePool in the file (the set given replaces them all)")
    _check_unique(pools, source, "NodePool")
    _check_unique(classes, source, "EC2NodeClass")
    _check_unique(overlays, source, "NodeOverlay")
    return ProposedConfig(pools, classes, source, nodeoverlays=overlays)


def _check_unique(manifests: list[dict[str, Any]], source: str, kind: str) -> None:
    seen: set[str] = set()
    for manifest in manifests:
        name = manifest["metadata"]["name"]
        if name in seen:
            raise InsightError(f"{source}: {kind} {name!r} is declared twice")
        seen.add(name)


def load_stack_file(path: str | Path) -> ProposedConfig:
    """``adze:nodePools``/``adze:nodeClasses`` of a ``Pulumi.<stack>.yaml``, checked by ``components.config``.

    Encrypted (``secure:``) values cannot be read offline; they are skipped (no NodePool field is secret).
    """
    from components.config import NAMESPACE, ConfigError, load_stack_config
    from components.karpenter_config import NODECLASS_API_VERSION, NODECLASS_KIND, NODEPOOL_API_VERSION

    source = str(path)
    documents = _read_yaml_documents(path)
    if len(documents) != 1 or not isinstance(documents[0], Mapping):
        raise InsightError(f"{source}: expected one Pulumi stack settings document")
    config = documents[0].get("config") or {}
    if not isinstance(config, Mapping):
        raise InsightError(f"{source}: config: expected a map of config keys")
    prefix = f"{NAMESPACE}:"
    raw = {
        key[len(prefix) :]: value
        for key, value in config.items()
        if str(key).startswith(prefix) and not (isinstance(value, Mapping) and "secure" in value)
    }
    if "nodePools" not in raw:
        raise InsightError(f"{source}: config: no {prefix}nodePools key (nothing to plan)")
    try:
        stack = load_stack_config(raw)
    except ConfigError as err:
        raise InsightError(f"{source}: {err.problems[0]}") from None
    pools = [
        {
            "apiVersion": NODEPOOL_API_VERSION,
            "kind": "NodePool",
            "metadata": {"name": entry.name},
            "spec": dict(entry.spec),
        }
        for entry in stack.node_pools
    ]
    classes = [
        {
            "apiVersion": NODECLASS_API_VERSION,
            "kind": NODECLASS_KIND,
            "metadata": {"name": entry.name},
            "spec": dict(entry.spec),
        }
        for entry in stack.node_classes
    ]
    region = config.get("aws:region")
    return ProposedConfig(pools, classes, source, region=region if isinstance(region, str) else "")
