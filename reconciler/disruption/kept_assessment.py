"""The pass's assessment of every node, kept from pass to pass and brought up to date by the nodes that changed.

``candidates.assess`` judges every managed node each pass and builds one ``Candidate`` per node, though after a
command only a few StateNodes are new. A node's verdict (``judge``) depends on its StateNode, its NodePool,
the catalog, the PDBs (by value) and the clock, the clock only inside ``[since, until)`` of its
``NodeAssessment`` (a nomination or a do-not-disrupt duration running out). This view keeps each managed node's
verdict, Candidate included, as a ``kept_per_node`` view: a later pass re-judges only the names that changed and
those whose ``until`` the clock has reached; every node is judged again when the catalog, a NodePool, an
EC2NodeClass or the PDBs changed, when the changes are too far back to tell, or when the clock goes backwards.
Kept candidates share the view's ``PassClock``, set to each pass's clock. Pure.

Held between passes: each managed node's verdict (its ``NodeAssessment``, its Candidate — which holds the
StateNode of its version — or its explanation), the moments, and the assessment built from them.
"""

from __future__ import annotations

from datetime import datetime

from reconciler.disruption.candidates import Assessment, Catalog, Verdict, collect, judge
from reconciler.disruption.kept_drift import catalog_inputs
from reconciler.disruption.kept_per_node import kept_node_view
from reconciler.disruption.types import PassClock
from reconciler.model.pdb import PdbLimits
from reconciler.state.cluster import ClusterState
from reconciler.state.node import StateNode

_KEY = "disruption.kept_assessment"


def kept_assess(state: ClusterState, catalog: Catalog, pdbs: PdbLimits, now: datetime) -> Assessment:
    """``assess(state, catalog, pdbs, now)``, kept from pass to pass (see the module). The lists are shared
    with the next pass's answer while nothing changes: read them, do not change them."""

    def verdict(node: StateNode, clock: PassClock) -> tuple[Verdict | None, datetime | None]:
        if not node.managed:
            return None, None
        found = judge(state, node, catalog, pdbs, clock)
        return found, found[0].until

    view = kept_node_view(state, _KEY, verdict, now, inputs=catalog_inputs(state, catalog),
                          fingerprint=pdbs.fingerprint)
    if view.answer is None:  # in ``state_nodes`` order
        view.answer = collect(map(view.values.get, state.state_nodes_by_name()))
    assessment: Assessment = view.answer
    return assessment
