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
