"""``nodeclaim_for_node``: the NodeClaim lookup the live StateStore and the simulator share."""

from __future__ import annotations

from reconciler.model.nodeclaim_lookup import nodeclaim_for_node


def claim(name: str, **status: str) -> dict:
    return {"metadata": {"name": name}, "status": status}


def test_by_provider_id_or_by_node_name_else_none() -> None:
    claims = [claim("c1", providerID="aws:///us-east-1a/i-1"), claim("c2", nodeName="ip-2")]
    by_id = {"metadata": {"name": "whatever"}, "spec": {"providerID": "aws:///us-east-1a/i-1"}}
    assert nodeclaim_for_node(by_id, claims)["metadata"]["name"] == "c1"
    assert nodeclaim_for_node({"metadata": {"name": "ip-2"}, "spec": {}}, claims)["metadata"]["name"] == "c2"
    assert nodeclaim_for_node({"metadata": {"name": "ip-3"}, "spec": {"providerID": "aws:///x/i-3"}}, claims) is None
    assert nodeclaim_for_node({"metadata": {}, "spec": {}}, [claim("c3")]) is None  # no name, no id: no match


def test_the_simulator_and_the_live_store_both_answer_with_this_lookup() -> None:
    """The rule (provider id, else node name) was the same in both copies before they were unified, so no
    behaviour tells a re-introduced copy apart: this pins that both callers go through the one function, and
    that each answers the table above as it does."""
    from reconciler.kube.memory import MemoryKube
    from reconciler.sim import engine
    from reconciler.state import store as store_module
    from reconciler.state.store import StateStore

    assert engine.lookup_nodeclaim is nodeclaim_for_node
    assert store_module.nodeclaim_for_node is nodeclaim_for_node
    claims = [claim("c1", providerID="aws:///us-east-1a/i-1"), claim("c2", nodeName="ip-2")]
    kube = MemoryKube()
    store = StateStore()
    full = [{"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", **manifest} for manifest in claims]
    kube.load(full)
    for manifest in full:
        store.upsert(manifest)
    nodes = [{"metadata": {"name": "whatever"}, "spec": {"providerID": "aws:///us-east-1a/i-1"}},
             {"metadata": {"name": "ip-2"}, "spec": {}},
             {"metadata": {"name": "ip-3"}, "spec": {"providerID": "aws:///x/i-3"}}]
    for node in nodes:
        expected = nodeclaim_for_node(node, claims)
        name = None if expected is None else expected["metadata"]["name"]
        assert engine.nodeclaim_for_node(kube, node) == name
        found = store.nodeclaim_for_node(node)
        assert (None if found is None else found["metadata"]["name"]) == name
