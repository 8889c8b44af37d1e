"""Property: no explanation names a node of the command the pass chose (the live loop emits each explanation as a
DisruptionBlocked event: it must never say a node it is disrupting is blocked).

Random small clusters with drifted nodes, nodes whose NodeClaim has a terminationGracePeriod (drift may then
take them despite do-not-disrupt pods and PDBs), do-not-disrupt pods, PDBs and empty nodes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from disruption_factories import NOW, TYPES, cluster, node_of, nodepool, pdb, pod, run_decide, ts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TYPE_BY_NAME = {t.name: t for t in TYPES}


@st.composite
def clusters(draw: st.DrawFn) -> list[Any]:
    grace = draw(st.sampled_from([None, "1h"]))
    objects: list[Any] = [nodepool(budgets=[{"nodes": draw(st.sampled_from(["100%", "1", "50%"]))}],
                                   labels={"rev": draw(st.sampled_from(["a", "b"]))}, termination_grace_period=grace)]
    for i in range(draw(st.integers(1, 4))):
        itype = TYPE_BY_NAME[draw(st.sampled_from(sorted(TYPE_BY_NAME)))]
        drifted = draw(st.booleans())
        conditions = [{"type": "Drifted", "status": "True", "reason": "NodePoolDrifted",
                       "lastTransitionTime": ts(NOW - timedelta(minutes=10))}] if drifted else []
        claim_grace = draw(st.sampled_from([None, "1h"]))
        objects.append(node_of(f"n{i}", itype, conditions=conditions, termination_grace_period=claim_grace))
        for j in range(draw(st.integers(0, 3))):
            guard = draw(st.sampled_from([None, None, "true"]))
            objects.append(pod(f"p{i}-{j}", node=f"n{i}", cpu="250m", labels={"app": draw(st.sampled_from("ab"))},
                               annotations={"karpenter.sh/do-not-disrupt": guard} if guard else {}))
    if draw(st.booleans()):
        objects.append(pdb("pdb-a", {"app": "a"}, max_unavailable=0))
    return objects


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_no_explanation_names_a_node_of_the_chosen_command(objects: list[Any]) -> None:
    decision = run_decide(cluster(*objects))
    if decision.command is None:
        return
    chosen = set(decision.command.node_names) | {c.nodeclaim for c in decision.command.candidates}
    named = [(e.node, e.nodeclaim, e.code) for e in decision.explanations
             if e.node in chosen or (e.nodeclaim and e.nodeclaim in chosen)]
    assert named == [], f"{decision.command.describe()} but explained {named}"
