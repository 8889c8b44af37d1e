"""NodeOverlays evaluated against each NodePool's instance types (gate ``NodeOverlay``). Pure.

``evaluate`` matches every overlay against every pool's types, as Karpenter's nodeoverlay controller does,
and fills a ``cloud.overlay.OverlayBook`` (which merges them by weight and prices launches); ``overlaid``
gives each pool's types with the cluster's overlays in effect. Matching reads an instance type's
requirements the way the scheduler does (``scheduling.instancetypes``), so it lives here, above the cloud
provider that only reads the book. The matching and merging rules are described in ``cloud.overlay``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from reconciler.cloud.overlay import Overlay, OverlayBook, by_weight
from reconciler.cloud.types import InstanceType, Offering
from reconciler.model import labels as wk
from reconciler.model.nodepool import NodePool
from reconciler.model.requirements import Requirements
from reconciler.scheduling.instancetypes import offering_allowed, offering_key, type_requirements


def _instance_requirements(pool: NodePool, instance_type: InstanceType) -> Requirements:
    """The type's requirements as the overlay sees them: every offering's zone and capacity type (not only
    available ones), the pool's labels and ``karpenter.sh/nodepool``."""
    every = instance_type if all(o.available for o in instance_type.offerings) else replace(
        instance_type, offerings=tuple(replace(o, available=True) for o in instance_type.offerings))
    labels = {**pool.labels, wk.NODEPOOL: pool.name}
    return type_requirements(every).merge(Requirements.from_labels(labels))


class _Matcher:
    """The types' requirements, built once per evaluation (every overlay is checked against every type)."""

    def __init__(self) -> None:
        self._requirements: dict[tuple[str, int], Requirements] = {}

    def selected(self, pool: NodePool, instance_type: InstanceType, overlay: Overlay) -> list[Offering]:
        key = (pool.name, id(instance_type))
        requirements = self._requirements.get(key)
        if requirements is None:
            requirements = self._requirements[key] = _instance_requirements(pool, instance_type)
        if requirements.incompatibility(overlay.requirements) is not None:
            return []
        allowed = offering_key(overlay.requirements)
        return [o for o in instance_type.offerings if offering_allowed(o, *allowed)]


def evaluate(
    overlays: Iterable[Overlay],
    pools: Mapping[str, NodePool],
    types_by_pool: Mapping[str, Sequence[InstanceType]],
) -> OverlayBook:
    """Every overlay against every pool's types, heaviest first; conflicting overlays are left out whole."""
    book = OverlayBook()
    ordered = by_weight(overlays)
    book.names = tuple(o.name for o in ordered)
    matcher = _Matcher()
    for overlay in ordered:
        if overlay.problem:
            continue
        matches = [
            (pool_name, instance_type, offerings)
            for pool_name, pool in sorted(pools.items())
            for instance_type in types_by_pool.get(pool_name, ())
            if (offerings := matcher.selected(pool, instance_type, overlay))
        ]
        conflict = book.conflict(overlay, matches)
        if conflict:
            book.conflicts[overlay.name] = conflict
            continue
        for pool_name, instance_type, offerings in matches:
            book.record(pool_name, instance_type.name, overlay, offerings)
        book.applied[overlay.name] = len({(p, t.name) for p, t, _ in matches if overlay.price_change or
                                          overlay.capacity})
    return book


def overlays_of(manifests: Iterable[Mapping[str, Any]]) -> list[Overlay]:
    return [Overlay.from_manifest(m) for m in manifests]


# -- the per-NodePool instance-type layer ------------------------------------------------------------------


def overlaid(
    state: Any, types_by_pool: Mapping[str, Sequence[InstanceType]]
) -> tuple[dict[str, Sequence[InstanceType]], OverlayBook]:
    """Each pool's types with the cluster's NodeOverlays in effect (``state``: a ``ClusterState``), and the
    book. The evaluation is kept on the state while the overlays, pools and type lists stay the same."""
    if not state.nodeoverlays:
        return dict(types_by_pool), OverlayBook()
    manifests = sorted(state.nodeoverlays.values(), key=lambda m: str((m.get("metadata") or {}).get("name", "")))
    key = (
        tuple(_overlay_key(m) for m in manifests),
        tuple((name, id(types), tuple(sorted(state.nodepools[name].labels.items())) if name in state.nodepools else ())
              for name, types in sorted(types_by_pool.items())),
    )
    kept = state.carried.get("overlays")
    if kept is not None and kept[0] == key:
        book = kept[2]
    else:
        book = evaluate(overlays_of(manifests), state.nodepools, types_by_pool)
        state.carried["overlays"] = (key, dict(types_by_pool), book)  # the lists stay alive: their ids stay theirs
    return {name: book.apply(name, types) for name, types in types_by_pool.items()}, book


def _overlay_key(manifest: Mapping[str, Any]) -> tuple[Any, ...]:
    metadata = manifest.get("metadata") or {}
    return (metadata.get("name"), metadata.get("resourceVersion"), metadata.get("generation"),
            repr(manifest.get("spec")))
