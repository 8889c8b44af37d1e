"""The pass's assessment of every node, kept from pass to pass and brought up to date by the nodes that changed.

``candidates.assess`` judges every managed node each pass and builds one ``Candidate`` per node, though after a
command only a few StateNodes are new. A node's verdict (``judge``) depends on its StateNode, its NodePool,
the catalog, the PDBs (by value) and the clock, the clock only inside ``[since, until)`` of its
``NodeAssessment`` (a nomination or a do-not-disrupt duration running out). This view keeps each node's
verdict, Candidate included, and for a later pass re-judges only the names ``ClusterState.node_changes_since``
reports and those whose ``until`` the clock has reached (a heap of moments); every node is judged again when
the catalog, a NodePool, an EC2NodeClass or the PDBs changed, when the changes are too far back to tell, or
when the clock goes backwards. Kept candidates share one ``PassClock``, set to each pass's clock. Pure.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.disruption.candidates import Assessment, Catalog, Verdict, collect, judge
from reconciler.disruption.kept_drift import catalog_inputs, due, push, same_objects
from reconciler.disruption.types import PassClock
from reconciler.model.pdb import PdbLimits
from reconciler.state.cluster import ClusterState

_KEY = "disruption.kept_assessment"



@dataclass(slots=True)
class _Kept:
    generation: int
    inputs: tuple[Any, ...]  # compared by identity
    pdbs: tuple[object, ...]  # compared by value
    now: datetime
    clock: PassClock
    verdicts: dict[str, Verdict | None]  # in ``state_nodes`` order (None: not managed)
    wakes: list[tuple[datetime, str]]  # heap: (until, node name)
    assessment: Assessment


def kept_assess(state: ClusterState, catalog: Catalog, pdbs: PdbLimits, now: datetime) -> Assessment:
    """``assess(state, catalog, pdbs, now)``, kept from pass to pass (see the module). The lists are shared
    with the next pass's answer while nothing changes: read them, do not change them."""
    generation = state.nodes_generation
    inputs = catalog_inputs(state, catalog)
    kept: _Kept | None = state.carried.get(_KEY)
    changes = None
    if kept is not None and kept.now <= now and kept.pdbs == pdbs.fingerprint and same_objects(kept.inputs, inputs):
        changes = state.node_changes_since(kept.generation)
    nodes = state.state_nodes_by_name()
    if kept is None or changes is None:
        clock = PassClock(now)
        wakes: list[tuple[datetime, str]] = []
        verdicts = {name: _verdict(state, node, catalog, pdbs, clock, wakes) for name, node in nodes.items()}
        heapq.heapify(wakes)
    else:
        clock = kept.clock
        clock.now = now
        quiet = not kept.wakes or now < kept.wakes[0][0]  # no verdict's span ends by now
        if not changes and generation == kept.generation and quiet:
            kept.now = now
            return kept.assessment
        wakes, names = due(kept.wakes, now)
        names |= changes
        verdicts = dict(kept.verdicts)
        reordered = False
        found: list[tuple[datetime, str]] = []
        for name in names:
            node = nodes.get(name)
            if node is None:
                verdicts.pop(name, None)
                continue
            reordered = reordered or name not in verdicts
            verdicts[name] = _verdict(state, node, catalog, pdbs, clock, found)
        if reordered:  # a new name goes where ``state_nodes`` has it
            verdicts = {name: verdicts[name] for name in nodes}
        push(wakes, found)
    assessment = collect(verdicts.values())
    state.carried[_KEY] = _Kept(generation, inputs, pdbs.fingerprint, now, clock, verdicts, wakes, assessment)
    return assessment


def _verdict(
    state: ClusterState, node: Any, catalog: Catalog, pdbs: PdbLimits, clock: PassClock,
    wakes: list[tuple[datetime, str]],
) -> Verdict | None:
    if not node.managed:
        return None
    found = judge(state, node, catalog, pdbs, clock)
    if found[0].until is not None:
        wakes.append((found[0].until, node.name))
    return found
