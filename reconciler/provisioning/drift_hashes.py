"""Static drift hashes stamped on NodeClaims at creation (pure).

Provisioning stamps them (``provisioning.nodeclaim``) and disruption compares them (``drift_detection``), so
they live here, below disruption.

- ``karpenter.sh/nodepool-hash`` (+ ``-hash-version``): the NodePool template minus
  requirements (labels, annotations, taints, startupTaints, nodeClassRef, expireAfter,
  terminationGracePeriod), so budget or requirement edits never drift nodes through it.
- ``karpenter.k8s.aws/ec2nodeclass-hash`` (+ ``-hash-version``): the EC2NodeClass spec fields
  that need no AWS lookup, plus the resolved AMI family (aws.md §6). Selector terms are left
  out: their effect is checked against the resolved AMIs, subnets and security groups.

Hashes are Adze's own (canonical JSON, SHA-256) with ``adze-*`` versions, so a stamp of another
algorithm is never compared with them. Adopting such a claim (one Karpenter created, ``v3`` / ``v4``)
works as Karpenter's own hash controllers handle a hash-version change: ``restamp`` gives it the
current version and the current hash of its NodePool / EC2NodeClass, unless it is already Drifted (then
only the version, so it stays drifted) — from then on a template change drifts it like any claim. The
live controller (``controllers.pools_and_classes.hash_stamper``) and the simulator's snapshot loading both call it.

Both are memoized: the disruption engine asks for them for every drifted candidate on every
pass. NodePools are immutable values, so they are cached per object; EC2NodeClass manifests are
plain dicts, so their entry keeps a copy of the spec it was computed from and is used only while
the spec still equals it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from reconciler.api.ec2_launch import METADATA_OPTIONS_DEFAULT
from reconciler.api.ec2_selectors import ALIAS_FAMILIES
from reconciler.model import labels as wk
from reconciler.model.durations import DurationError, parse_duration
from reconciler.model.nodepool import NodePool

NODEPOOL_HASH_VERSION = "adze-v1"

NODECLASS_HASH_ANNOTATION = "karpenter.k8s.aws/ec2nodeclass-hash"
NODECLASS_HASH_VERSION_ANNOTATION = "karpenter.k8s.aws/ec2nodeclass-hash-version"
NODECLASS_HASH_VERSION = "adze-v1"

# EC2NodeClass fields resolved through AWS (checked by CloudProvider.is_drifted) or not drift-relevant.
_NODECLASS_UNHASHED = frozenset(
    {
        "subnetSelectorTerms",
        "securityGroupSelectorTerms",
        "capacityReservationSelectorTerms",
        "amiSelectorTerms",
        "ipPrefixCount",
        "amiFamily",
    }
)
_MEMO_SIZE = 256

K = TypeVar("K")


class _IdentityMemo(Generic[K]):
    """A bounded LRU of hashes keyed by object identity; the entry holds the object so its id is not reused.

    ``state_of(obj)`` is what gets hashed and kept (the object itself, or a copy of a mutable one);
    ``still_valid(state, obj)`` decides whether an entry still describes ``obj``.
    """

    def __init__(self, state_of: Callable[[K], K], still_valid: Callable[[K, K], bool]) -> None:
        self._entries: OrderedDict[int, tuple[K, K, str]] = OrderedDict()
        self._lock = threading.Lock()  # the provisioner and disruption passes run in worker threads
        self._state_of = state_of
        self._still_valid = still_valid

    def get(self, obj: K, compute: Callable[[K], str]) -> str:
        key = id(obj)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is obj and self._still_valid(entry[1], obj):
                self._entries.move_to_end(key)
                return entry[2]
        state = self._state_of(obj)
        value = compute(state)  # hashing the kept state keeps value and state consistent
        with self._lock:
            self._entries[key] = (obj, state, value)
            self._entries.move_to_end(key)
            while len(self._entries) > _MEMO_SIZE:
                self._entries.popitem(last=False)
        return value


def _canonical(value: Any) -> Any:
    """Normal form for hashing: empty and zero values dropped (absent == empty), lists as sets."""
    if isinstance(value, Mapping):
        normal = {str(k): _canonical(v) for k, v in value.items()}
        return {k: v for k, v in normal.items() if v not in (None, "", [], {}, False, 0)}
    if isinstance(value, list | tuple):
        items = [_canonical(v) for v in value]
        return sorted((i for i in items if i not in (None, "", [], {})), key=lambda i: json.dumps(i, sort_keys=True))
    return value


def _stable_hash(value: Any) -> str:
    text = json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _duration(text: str | None) -> float | str | None:
    """Durations compare by length of time ("60m" == "1h"); ``Never`` stays as is."""
    if text is None or text == "Never":
        return text
    try:
        return parse_duration(text)
    except DurationError:
        return text


def _compute_nodepool_hash(pool: NodePool) -> str:
    return _stable_hash(
        {
            "labels": dict(pool.labels),
            "annotations": dict(pool.annotations),
            "taints": [t.to_manifest() for t in pool.taints],
            "startupTaints": [t.to_manifest() for t in pool.startup_taints],
            "nodeClassRef": dict(pool.node_class_ref),
            "expireAfter": _duration(pool.expire_after or "720h"),
            "terminationGracePeriod": _duration(pool.termination_grace_period),
        }
    )


# NodePool values are immutable: the object itself is the whole key.
_nodepool_memo: _IdentityMemo[NodePool] = _IdentityMemo(lambda pool: pool, lambda state, pool: True)


def nodepool_hash(nodepool: NodePool | Mapping[str, Any]) -> str:
    """``karpenter.sh/nodepool-hash``: the template minus requirements (so budgets never drift nodes)."""
    if isinstance(nodepool, NodePool):
        return _nodepool_memo.get(nodepool, _compute_nodepool_hash)
    return _compute_nodepool_hash(NodePool.from_manifest(nodepool))


def nodepool_hash_annotations(nodepool: NodePool | Mapping[str, Any]) -> dict[str, str]:
    """The annotations a NodeClaim gets at creation, so later template edits show up as drift."""
    return {wk.NODEPOOL_HASH: nodepool_hash(nodepool), wk.NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION}


def resolved_ami_family(spec: Mapping[str, Any]) -> str:
    """The AMI family an EC2NodeClass resolves to: ``amiFamily``, else the family of its first alias."""
    if spec.get("amiFamily"):
        return str(spec["amiFamily"])
    for term in spec.get("amiSelectorTerms") or []:
        alias = str(term.get("alias") or "").partition("@")[0]
        if alias:
            return ALIAS_FAMILIES.get(alias.lower(), alias)
    return "Custom"


def _compute_nodeclass_hash(spec: Mapping[str, Any]) -> str:
    hashed = {k: v for k, v in spec.items() if k not in _NODECLASS_UNHASHED}
    # A spec read back from the API server has the CRD's metadataOptions default filled in, one from a
    # scenario or proposal file may not: a value equal to its default is hashed as absent so both agree.
    options = hashed.get("metadataOptions")
    if isinstance(options, Mapping):
        hashed["metadataOptions"] = {k: v for k, v in options.items() if METADATA_OPTIONS_DEFAULT.get(k) != v}
    hashed["resolvedAmiFamily"] = resolved_ami_family(spec)
    return _stable_hash(hashed)


# Specs are mutable dicts: an entry is used only while the spec still equals the copy it was hashed from
# (a deep ``==`` in C, far cheaper than canonicalising, serialising and digesting it again).
_nodeclass_memo: _IdentityMemo[Mapping[str, Any]] = _IdentityMemo(copy.deepcopy, lambda state, spec: state == spec)


def nodeclass_hash(nodeclass: Mapping[str, Any]) -> str:
    """``karpenter.k8s.aws/ec2nodeclass-hash``: the spec fields needing no AWS lookup, plus the AMI family.

    Editing userData, role/instanceProfile, tags, kubelet, blockDeviceMappings,
    metadataOptions, instanceStorePolicy, ... changes it; selector terms do not
    (their effect is checked against resolved AMIs, subnets and security groups).
    """
    spec = nodeclass.get("spec")
    if not isinstance(spec, Mapping):
        return _compute_nodeclass_hash({})
    return _nodeclass_memo.get(spec, _compute_nodeclass_hash)


def nodeclass_hash_annotations(nodeclass: Mapping[str, Any]) -> dict[str, str]:
    """Annotations for a NodeClaim launched with this EC2NodeClass.

    (Karpenter also writes them on the EC2NodeClass; Adze compares the claim's stamp with the live spec.)
    """
    return {
        NODECLASS_HASH_ANNOTATION: nodeclass_hash(nodeclass),
        NODECLASS_HASH_VERSION_ANNOTATION: NODECLASS_HASH_VERSION,
    }


def restamp(
    annotations: Mapping[str, str],
    nodepool: NodePool | Mapping[str, Any] | None,
    nodeclass: Mapping[str, Any] | None,
    *,
    drifted: bool,
) -> dict[str, str]:
    """The annotations to set on a NodeClaim whose hash stamps are of another version (empty when none are):
    Karpenter's ``nodepool.hash`` / ``nodeclass.hash`` controllers' re-stamping, with Adze's hashes."""
    update: dict[str, str] = {}
    stamps = (
        (wk.NODEPOOL_HASH, wk.NODEPOOL_HASH_VERSION, NODEPOOL_HASH_VERSION, nodepool,
         lambda: nodepool_hash(nodepool)),  # type: ignore[arg-type]
        (NODECLASS_HASH_ANNOTATION, NODECLASS_HASH_VERSION_ANNOTATION, NODECLASS_HASH_VERSION, nodeclass,
         lambda: nodeclass_hash(nodeclass)),  # type: ignore[arg-type]
    )
    for key, version_key, version, owner, current in stamps:
        if owner is None or annotations.get(version_key) == version:
            continue
        update[version_key] = version
        if not drifted:  # a drifted claim keeps its old hash, so it stays drifted under the new version
            update[key] = current()
    return update
