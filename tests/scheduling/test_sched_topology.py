"""Topology spread constraints, pod affinity and pod anti-affinity."""

from __future__ import annotations

from collections import Counter

from sched_factories import affinity_term, node, nodepool, pod, requirement, solve, spread

from reconciler.model import labels as wk
from reconciler.settings import Settings

WEB = {"app": "web"}


def zones_of(result) -> Counter:
    counts: Counter = Counter()
    for claim in result.nodeclaims:
        zone = requirement(claim.manifest(), wk.ZONE)
        assert zone is not None and len(zone["values"]) == 1, zone
        counts[zone["values"][0]] += len(claim.pods)
    return counts


def web_pods(count: int, **spec) -> list[dict]:
    return [pod(f"web-{i}", labels=dict(WEB), **spec) for i in range(count)]


def test_zone_spread_balances_pods_across_zones():
    result = solve([nodepool(), *web_pods(6, topologySpreadConstraints=[spread(wk.ZONE, WEB)])])
    assert zones_of(result) == {"test-zone-1": 2, "test-zone-2": 2, "test-zone-3": 2}


def test_zone_spread_counts_pods_already_running():
    existing = [
        node("n1", zone="test-zone-1"),
        pod("old-0", labels=dict(WEB), node_name="n1"),
        pod("old-1", labels=dict(WEB), node_name="n1"),
    ]
    result = solve([nodepool(), *existing, *web_pods(4, topologySpreadConstraints=[spread(wk.ZONE, WEB)])])
    # Zone 1 already has 2: the 4 new pods fill zones 2 and 3 first.
    placed = zones_of(result) + Counter(result.existing.values() and {"test-zone-1": len(result.existing)})
    assert placed == {"test-zone-2": 2, "test-zone-3": 2}


def test_pools_restricted_to_fewer_zones_limit_the_spread():
    pool = nodepool(
        requirements=[{"key": wk.ZONE, "operator": "In", "values": ["test-zone-1", "test-zone-2"]}]
    )
    result = solve([pool, *web_pods(4, topologySpreadConstraints=[spread(wk.ZONE, WEB)])])
    assert zones_of(result) == {"test-zone-1": 2, "test-zone-2": 2}


def test_larger_max_skew_allows_uneven_spread():
    result = solve([nodepool(), *web_pods(4, topologySpreadConstraints=[spread(wk.ZONE, WEB, max_skew=4)])])
    assert sum(zones_of(result).values()) == 4
    assert len(result.nodeclaims) == 1  # all four fit one node since skew 4 allows it


def test_hostname_spread_puts_at_most_max_skew_matching_pods_per_node():
    result = solve([nodepool(), *web_pods(4, topologySpreadConstraints=[spread(wk.HOSTNAME, WEB)])])
    assert [len(c.pods) for c in result.nodeclaims] == [1, 1, 1, 1]
    result = solve(
        [nodepool(), *web_pods(4, topologySpreadConstraints=[spread(wk.HOSTNAME, WEB, max_skew=2)])]
    )
    assert [len(c.pods) for c in result.nodeclaims] == [2, 2]


def test_capacity_type_spread():
    result = solve([nodepool(), *web_pods(4, topologySpreadConstraints=[spread(wk.CAPACITY_TYPE, WEB)])])
    capacity = Counter()
    for claim in result.nodeclaims:
        capacity[tuple(requirement(claim.manifest(), wk.CAPACITY_TYPE)["values"])] += len(claim.pods)
    assert capacity == {("on-demand",): 2, ("spot",): 2}


def test_a_pod_its_own_selector_does_not_match_does_not_move_the_skew():
    other = [
        pod(f"other-{i}", labels={"app": "other"}, topologySpreadConstraints=[spread(wk.ZONE, WEB)])
        for i in range(4)
    ]
    result = solve([nodepool(), *other])
    # Nothing matches app=web, so counts stay 0 and every pod may go to the same (first) zone.
    assert len(result.nodeclaims) == 1


def test_min_domains_forces_spreading_until_enough_domains_exist():
    constraint = spread(wk.ZONE, WEB, max_skew=2, minDomains=3)
    pool = nodepool(
        requirements=[{"key": wk.ZONE, "operator": "In", "values": ["test-zone-1", "test-zone-2"]}]
    )
    result = solve([pool, *web_pods(6, topologySpreadConstraints=[constraint])])
    # Only 2 of the 3 required domains exist: the global minimum stays 0, so each zone holds at most maxSkew.
    assert zones_of(result) == {"test-zone-1": 2, "test-zone-2": 2}
    assert len(result.pending) == 2


def test_schedule_anyway_spread_is_relaxed_when_unsatisfiable():
    pool = nodepool(requirements=[{"key": wk.ZONE, "operator": "In", "values": ["test-zone-1"]}])
    full = node(
        "n2", zone="test-zone-2", nodepool_name=None, taints=[{"key": "full", "effect": "NoSchedule"}]
    )
    hard = solve([pool, full, *web_pods(3, topologySpreadConstraints=[spread(wk.ZONE, WEB)])])
    soft = solve(
        [pool, *web_pods(3, topologySpreadConstraints=[spread(wk.ZONE, WEB, when="ScheduleAnyway")])]
    )
    assert not soft.pending
    assert hard.pending  # zone 2 exists (an unmanaged node) but cannot take more pods


def test_node_affinity_policy_ignore_counts_domains_the_pod_cannot_use():
    constraint = spread(wk.ZONE, WEB, nodeAffinityPolicy="Ignore")
    blocked_zone = node("n3", zone="test-zone-3", nodepool_name=None)
    objects = [nodepool(), blocked_zone, pod("w3", labels=dict(WEB), node_name="n3")]
    honor = solve(
        [
            *objects,
            *web_pods(
                2, nodeSelector={wk.ZONE: "test-zone-1"}, topologySpreadConstraints=[spread(wk.ZONE, WEB)]
            ),
        ]
    )
    ignore = solve(
        [
            *objects,
            *web_pods(2, nodeSelector={wk.ZONE: "test-zone-1"}, topologySpreadConstraints=[constraint]),
        ]
    )
    assert not honor.pending
    assert zones_of(ignore) == {"test-zone-1": 2}


def test_node_taints_policy_honor_skips_domains_of_pools_the_pod_does_not_tolerate():
    tainted = nodepool(
        "zone3",
        taints=[{"key": "special", "effect": "NoSchedule"}],
        requirements=[{"key": wk.ZONE, "operator": "In", "values": ["test-zone-3"]}],
    )
    open_pool = nodepool(
        "open", requirements=[{"key": wk.ZONE, "operator": "In", "values": ["test-zone-1", "test-zone-2"]}]
    )
    ignore = solve([tainted, open_pool, *web_pods(4, topologySpreadConstraints=[spread(wk.ZONE, WEB)])])
    honor = solve(
        [
            tainted,
            open_pool,
            *web_pods(4, topologySpreadConstraints=[spread(wk.ZONE, WEB, nodeTaintsPolicy="Honor")]),
        ]
    )
    assert len(ignore.pending) == 2  # zone 3 counts as an (unusable) domain: skew blocks the 3rd/4th pods
    assert not honor.pending and zones_of(honor) == {"test-zone-1": 2, "test-zone-2": 2}


def test_zonal_pod_affinity_keeps_pods_together():
    affinity = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(wk.ZONE, WEB)]}
    }
    result = solve([nodepool(), *web_pods(4, cpu="1500m", affinity=affinity)])
    assert len(zones_of(result)) == 1 and sum(zones_of(result).values()) == 4


def test_pod_affinity_follows_a_running_pod():
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(wk.ZONE, {"app": "db"})]
        }
    }
    objects = [
        nodepool(),
        node("n2", zone="test-zone-2", cpu="1"),
        pod("db", labels={"app": "db"}, cpu="950m", node_name="n2"),
        pod("client", affinity=affinity),
    ]
    result = solve(objects)
    assert not result.existing
    assert zones_of(result) == {"test-zone-2": 1}


def test_pod_affinity_to_nothing_is_unschedulable_unless_self_matching():
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(wk.ZONE, {"app": "db"})]
        }
    }
    result = solve([nodepool(), pod("client", affinity=affinity)])
    assert "default/client" in result.pending and "pod affinity" in result.pending["default/client"]


def test_hostname_pod_affinity_puts_pods_on_one_node():
    affinity = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(wk.HOSTNAME, WEB)]}
    }
    result = solve([nodepool(), *web_pods(3, affinity=affinity)])
    assert [len(c.pods) for c in result.nodeclaims] == [3]


def test_hostname_anti_affinity_gives_each_pod_its_own_node():
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(wk.HOSTNAME, WEB)]
        }
    }
    result = solve([nodepool(), *web_pods(3, affinity=anti)])
    assert [len(c.pods) for c in result.nodeclaims] == [1, 1, 1]


def test_zone_anti_affinity_allows_one_pod_per_zone():
    anti = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(wk.ZONE, WEB)]}
    }
    pinned = [
        pod(f"web-{zone}", labels=dict(WEB), affinity=anti, nodeSelector={wk.ZONE: zone})
        for zone in ("test-zone-1", "test-zone-2", "test-zone-3")
    ]
    result = solve([nodepool(), *pinned, pod("web-z-extra", labels=dict(WEB), affinity=anti)])
    assert zones_of(result) == {"test-zone-1": 1, "test-zone-2": 1, "test-zone-3": 1}
    assert list(result.pending) == ["default/web-z-extra"]


def test_unpinned_zone_anti_affinity_places_one_pod_per_batch():
    # The claim's zone is not decided until launch, so it blocks every zone it could take (Karpenter's rule).
    anti = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(wk.ZONE, WEB)]}
    }
    result = solve([nodepool(), *web_pods(3, affinity=anti)])
    assert len(result.nodeclaims) == 1 and len(result.pending) == 2


def test_running_pods_anti_affinity_is_enforced_in_reverse():
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(wk.ZONE, {"app": "noisy"})]
        }
    }
    guard = pod("guard", labels={"app": "guard"}, affinity=anti, node_name="n1")
    objects = [nodepool(), node("n1", zone="test-zone-1"), guard, pod("noisy", labels={"app": "noisy"})]
    result = solve(objects)
    # The running pod forbids app=noisy in its zone: the new pod goes elsewhere, not onto n1.
    assert not result.existing
    assert requirement(result.nodeclaims[0].manifest(), wk.ZONE)["values"] == ["test-zone-2", "test-zone-3"]


def test_preferred_anti_affinity_is_relaxed_when_it_cannot_be_met():
    anti = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": affinity_term(wk.ZONE, WEB)}
            ]
        }
    }
    result = solve([nodepool(), *web_pods(4, affinity=anti)])
    assert not result.pending and sum(len(c.pods) for c in result.nodeclaims) == 4
    ignored = solve([nodepool(), *web_pods(4, affinity=anti)], settings=Settings(preference_policy="Ignore"))
    assert len(ignored.nodeclaims) == 1


def test_undecided_zone_of_a_planned_claim_blocks_every_zone_for_anti_affinity():
    # The first pod needs a claim whose zone stays open (no zone constraint): anti-affinity pods must then
    # treat all its zones as taken.
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(wk.ZONE, {"app": "first"})]
        }
    }
    result = solve([nodepool(), pod("first", cpu="2", labels={"app": "first"}), pod("second", affinity=anti)])
    assert "default/second" in result.pending


def test_affinity_namespaces_select_other_namespaces():
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {**affinity_term(wk.HOSTNAME, {"app": "db"}), "namespaces": ["data"]}
            ]
        }
    }
    objects = [
        nodepool(),
        node("n1"),
        pod("db", labels={"app": "db"}, namespace="data", node_name="n1"),
        pod("app", affinity=anti),
    ]
    assert not solve(objects).existing
    same_namespace_only = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(wk.HOSTNAME, {"app": "db"})]
        }
    }
    objects[-1] = pod("app", affinity=same_namespace_only)
    assert solve(objects).existing == {"default/app": "n1"}
