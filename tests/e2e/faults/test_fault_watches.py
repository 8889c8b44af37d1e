"""Watches that go silent, fail or expire: noticed, logged, re-listed, and the reconciler keeps acting.

The live audit (issue 24): with the watch streams open but silent for 150 s, the Lease kept renewing, nothing
was logged and 5 new pending pods were ignored throughout; after a watch-only outage (500s for 30 s) the
reflectors re-watched without re-listing. Here the reconciler's proxy silences every watch (open streams and
new ones) for ``SILENCE`` seconds, a scaled-down 150 s against a scaled-down progress deadline
(``WATCH_PROGRESS_DEADLINE``), while the Deployment grows: the reconciler must notice within the deadline, log
it, re-list, and launch capacity for the new pods while the watches are still silent.
"""

from __future__ import annotations

import time

from ctrl_harness import wait_for
from ctrl_objects import deployment
from e2e_rig import e2e_nodepool
from fault_rig import ApiServer, FaultRig, fault_rig
from support.fault_proxy import Match

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.kube.api import DEPLOYMENT, NODECLAIM, POD

DEADLINE = 2.0  # WATCH_PROGRESS_DEADLINE, scaled down like the silence (production: 2 min)
SILENCE = 15.0
WATCHED_KINDS = 10  # the reconciler watches at least this many kinds (pods, nodes, NodeClaims, NodePools, ...)


async def bound_pods(rig: FaultRig) -> int:
    pods, _ = await rig.server.admin.list(POD, rig.server.namespace)
    return sum(1 for p in pods if p["spec"].get("nodeName"))


async def claims(rig: FaultRig) -> int:
    return len((await rig.server.admin.list(NODECLAIM))[0])


async def test_silent_watches_are_noticed_relisted_and_new_pods_acted_on(apiserver: ApiServer,
                                                                         aws: OfflineAWS) -> None:
    async with fault_rig(apiserver, aws) as rig:
        await rig.seed(aws.nodeclass(), e2e_nodepool(), deployment(replicas=2, cpu="1500m"))
        a = rig.launch(await rig.replica("a", settings={"watch_progress_deadline": DEADLINE}))
        assert await wait_for(lambda: _at_least(bound_pods(rig), 2), timeout=60)
        before = await claims(rig)
        silence = a.proxy.silence_watches()
        cut = time.monotonic()
        await rig.server.admin.patch(DEPLOYMENT, "inflate", {"spec": {"replicas": 7}}, rig.server.namespace)
        acted = await wait_for(lambda: _at_least(bound_pods(rig), 7), timeout=SILENCE)
        acted_at = time.monotonic() - cut
        still_silent = silence in a.proxy.rules and a.proxy.open_watches() > 0
        a.proxy.remove(silence)
        stalls = [line for line in rig.log_lines() if "made no progress" in str(line.get("message", ""))]
        lists = sum(n for (verb, _), n in a.proxy.counts(cut, forwarded_only=True).items() if verb == "list")
        print(f"silent watches: {len(stalls)} stalls logged, {lists} lists, 7 pods bound after {acted_at:.1f} s")
        assert acted and still_silent, "the new pods got capacity while every watch was still silent"
        assert await claims(rig) > before
        assert stalls, "the stall was logged"
        assert {line.get("kind") for line in stalls} >= {"Pod", "Node", "NodeClaim"}
        assert lists >= 3, "the kinds were re-listed"


async def test_a_watch_only_outage_ends_in_a_relist_of_every_kind(apiserver: ApiServer, aws: OfflineAWS) -> None:
    """500s to every watch for a while (lists still work), then 410 Gone on the first re-watch: every kind is
    listed again afterwards, and pods created during the outage are acted on."""
    async with fault_rig(apiserver, aws) as rig:
        await rig.seed(aws.nodeclass(), e2e_nodepool(), deployment(replicas=1, cpu="1500m"))
        a = rig.launch(await rig.replica("a"))
        assert await wait_for(lambda: _at_least(bound_pods(rig), 1), timeout=60)
        # Every kind's watch open (a loaded machine once caught them between a watch timeout and the re-watch,
        # and only one was dropped), then the outage lasts until each dropped watch has hit it at least once.
        assert await wait_for(lambda: _true(a.proxy.open_watches() >= WATCHED_KINDS), timeout=60), \
            a.proxy.open_watches()
        cut = time.monotonic()
        outage = a.proxy.answer(500, Match(watch=True))
        dropped = a.proxy.drop_watches()
        await rig.server.admin.patch(DEPLOYMENT, "inflate", {"spec": {"replicas": 4}}, rig.server.namespace)
        assert await wait_for(lambda: _true(outage.hits >= dropped), timeout=30), (outage.hits, dropped)
        a.proxy.remove(outage)
        a.proxy.gone_on_rewatch(times=3)
        assert await wait_for(lambda: _at_least(bound_pods(rig), 4), timeout=60)
    listed = {resource for (verb, resource), n in a.proxy.counts(cut, forwarded_only=True).items() if verb == "list"}
    assert dropped >= WATCHED_KINDS and outage.hits >= dropped
    assert {"pods", "nodes", "nodeclaims", "nodepools", "ec2nodeclasses"} <= listed, listed


async def _true(value: bool) -> bool:
    return value


async def _at_least(count: object, expected: int) -> bool:
    return await count >= expected  # type: ignore[operator,misc]
