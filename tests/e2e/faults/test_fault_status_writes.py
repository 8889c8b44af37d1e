"""Every status write keeps a condition another writer added meanwhile (optimistic concurrency).

The live audit (issue 24): the EC2NodeClass status patch was not guarded, so a condition another writer added
just before it was wiped. Here the reconciler's proxy holds its first status write of each kind while another
client adds a condition of its own to the same object's status; when the held write goes on, it must not wipe
that condition (a resourceVersion-guarded write gets 409, reads the object and merges again).
"""

from __future__ import annotations

import pytest
from ctrl_harness import wait_for
from ctrl_objects import deployment
from e2e_rig import e2e_nodepool
from fault_rig import ApiServer, fault_rig
from support.fault_proxy import Match

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.kube.api import EC2NODECLASS, NODECLAIM, NODEPOOL, Kind, KubeAPI

THEIRS = {"type": "ExampleComAudited", "status": "True", "reason": "Audited", "message": "another writer's",
          "lastTransitionTime": "2026-01-01T00:00:00Z"}
KINDS = {"ec2nodeclasses": (EC2NODECLASS, "Ready"), "nodepools": (NODEPOOL, "Ready"),
         "nodeclaims": (NODECLAIM, "Launched")}


async def name_of(admin: KubeAPI, kind: Kind) -> str:
    items, _ = await admin.list(kind)
    return str(items[0]["metadata"]["name"]) if items else ""


async def conditions(admin: KubeAPI, kind: Kind, name: str) -> set[str]:
    found = await admin.get(kind, name)
    return {c["type"] for c in (found.get("status") or {}).get("conditions") or []}


@pytest.mark.parametrize("resource", sorted(KINDS))
async def test_a_held_status_write_keeps_a_condition_added_meanwhile(apiserver: ApiServer, aws: OfflineAWS,
                                                                      resource: str) -> None:
    kind, ours = KINDS[resource]
    async with fault_rig(apiserver, aws) as rig:
        await rig.seed(aws.nodeclass(), e2e_nodepool(), deployment(replicas=1, cpu="1500m"))
        a = await rig.replica("a")
        held = a.proxy.stall(Match(methods={"PATCH", "PUT"}, where=lambda r: r.path.startswith("/apis/") and
                                   f"/{resource}/" in r.path and r.path.endswith("/status")))
        rig.launch(a)
        assert await wait_for(lambda: _true(held.hits >= 1), timeout=60), "the first status write is held"
        admin = rig.server.admin
        name = await name_of(admin, kind)
        current = await admin.get(kind, name)
        status = dict(current.get("status") or {})
        status["conditions"] = [*(status.get("conditions") or []), THEIRS]
        await admin.patch(kind, name, {"status": status}, subresource="status")  # another writer, meanwhile
        a.proxy.remove(held)
        assert await wait_for(lambda: _has(admin, kind, name, ours), timeout=60), "our write went through"
        found = await conditions(admin, kind, name)
        assert THEIRS["type"] in found, f"{resource}: the other writer's condition was wiped: {found}"


async def _has(admin: KubeAPI, kind: Kind, name: str, condition: str) -> bool:
    return condition in await conditions(admin, kind, name)


async def _true(value: object) -> bool:
    return bool(value)
