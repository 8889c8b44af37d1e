"""Which NodeClaim a Node belongs to: the one lookup the live controllers and the simulator share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def nodeclaim_for_node(node: Mapping[str, Any], nodeclaims: Iterable[Mapping[str, Any]]) -> Any:
    """The NodeClaim whose ``status.providerID`` is the node's ``spec.providerID`` or whose ``status.nodeName``
    is the node's name (a claim registered before its instance reported an id), else None. Returns the claim
    object it was given (``Manifest``), unchanged."""
    name = (node.get("metadata") or {}).get("name")
    provider_id = (node.get("spec") or {}).get("providerID")
    for claim in nodeclaims:
        status = claim.get("status") or {}
        if (provider_id and status.get("providerID") == provider_id) or (name and status.get("nodeName") == name):
            return claim
    return None
