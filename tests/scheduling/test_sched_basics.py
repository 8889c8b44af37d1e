"""Provisioning decisions for resources, requirements, taints, pools, limits and instance-type choice."""

from __future__ import annotations

from sched_factories import (
    NOW,
    catalog,
    claim_pods,
    daemonset,
    instance_type,
    names,
    node,
    nodepool,
    pod,
    pods,
    requirement,
    solve,
)

from reconciler.model import labels as wk
from reconciler.provisioning.provisioner import plan
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState


def test_packs_pods_onto_the_cheapest_type_that_fits_them_all():
    result = solve([nodepool(), *pods("web", 5, cpu="1", memory="1Gi")])
    assert len(result.nodeclaims) == 1
    claim = result.nodeclaims[0]
    assert claim.pods == [f"default/web-{i}" for i in range(5)]
    # 5 CPU (+ overhead 100m) only fits the 8-vCPU types; cheapest first.
    assert claim.instance_type_options == ["large", "gpu"]
    assert not result.pending


def test_options_are_ordered_by_cheapest_available_offering():
    types = [
        instance_type("pricey", 4, 8, price=1.0),
        instance_type(
            "cheap-but-sold-out",
            4,
            8,
            price=0.1,
            unavailable=[
                (z, ct) for z in ("test-zone-1", "test-zone-2", "test-zone-3") for ct in ("spot", "on-demand")
            ],
        ),
        instance_type("cheap", 4, 8, price=0.2),
    ]
    result = solve([nodepool(), pod("p", cpu="1")], types)
    assert result.nodeclaims[0].instance_type_options == ["cheap", "pricey"]


def test_init_containers_sidecars_and_runtime_class_overhead_count():
    big_init = pod(
        "init",
        cpu="100m",
        initContainers=[
            {"name": "migrate", "resources": {"requests": {"cpu": "3"}}},
        ],
    )
    sidecar = pod(
        "sidecar",
        cpu="1",
        initContainers=[
            {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "2500m"}}},
        ],
    )
    runtime = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "kata"},
        "handler": "kata",
        "overhead": {"podFixed": {"cpu": "3"}},
    }
    kata = pod("kata", cpu="1", runtimeClassName="kata")
    for workload in (big_init, sidecar, kata):
        result = solve([nodepool(), runtime, workload])
        # 3 / 3.5 / 4 CPU: too big for the 2-vCPU type, and 4 CPU plus overhead needs the 8-vCPU ones.
        assert "small" not in result.nodeclaims[0].instance_type_options, workload["metadata"]["name"]
    assert solve([nodepool(), runtime, kata]).nodeclaims[0].instance_type_options == ["large", "gpu"]


def test_node_selector_and_custom_labels_need_the_pool_to_define_them():
    pools = [nodepool("plain"), nodepool("teams", labels={"team": "a"})]
    result = solve([*pools, pod("p", nodeSelector={"team": "a"})])
    assert [c.nodepool for c in result.nodeclaims] == ["teams"]
    assert result.nodeclaims[0].manifest()["metadata"]["labels"]["team"] == "a"
    # A custom label no pool defines leaves the pod pending, with Karpenter's hint.
    result = solve([*pools, pod("q", nodeSelector={"tam": "a"})])
    assert not result.nodeclaims
    assert 'label "tam" does not have known values' in result.pending["default/q"]


def test_well_known_labels_need_not_be_defined_by_the_pool():
    result = solve([nodepool(), pod("p", nodeSelector={wk.ARCH: "arm64"})])
    assert result.nodeclaims[0].instance_type_options == ["arm-medium"]


def test_required_node_affinity_terms_are_tried_in_order():
    def term(values: list[str]) -> dict:
        return {"matchExpressions": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": values}]}

    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [term(["does-not-exist"]), term(["medium"])]
            }
        }
    }
    result = solve([nodepool(), pod("p", affinity=affinity)])
    assert result.nodeclaims[0].instance_type_options == ["medium"]


def test_heaviest_preferred_node_affinity_is_honoured_then_relaxed():
    def prefer(weight: int, values: list[str]) -> dict:
        return {"weight": weight,
                "preference": {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": values}]}}

    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                prefer(1, ["test-zone-1"]),
                prefer(50, ["test-zone-3"]),
            ]
        }
    }
    manifest = solve([nodepool(), pod("p", affinity=affinity)]).nodeclaims[0].manifest()
    assert requirement(manifest, wk.ZONE)["values"] == ["test-zone-3"]
    # Unsatisfiable preference (the pool only has zone 2): relaxed away, pod still scheduled.
    pool = nodepool(requirements=[{"key": wk.ZONE, "operator": "In", "values": ["test-zone-2"]}])
    result = solve([pool, pod("p", affinity=affinity)])
    assert len(result.nodeclaims) == 1 and not result.pending


def test_preference_policy_ignore_never_considers_preferences():
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchExpressions": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["large"]}]
                    },
                }
            ]
        }
    }
    respect = solve([nodepool(), pod("p", affinity=affinity)])
    ignore = solve([nodepool(), pod("p", affinity=affinity)], settings=Settings(preference_policy="Ignore"))
    assert respect.nodeclaims[0].instance_type_options == ["large"]
    assert ignore.nodeclaims[0].instance_type_options[0] == "small"


def test_pods_must_tolerate_pool_taints_but_not_startup_taints():
    tainted = nodepool(
        "gpu-pool",
        taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
        startup_taints=[{"key": "agent", "effect": "NoSchedule"}],
        weight=10,
    )
    plain = [
        nodepool("other", requirements=[{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["small"]}])
    ]
    result = solve([tainted, *plain, pod("plain")])
    assert [c.nodepool for c in result.nodeclaims] == ["other"]
    tolerant = pod("tolerant", tolerations=[{"key": "gpu", "operator": "Exists"}])
    result = solve([tainted, *plain, tolerant])
    assert [c.nodepool for c in result.nodeclaims] == ["gpu-pool"]
    spec = result.nodeclaims[0].manifest()["spec"]
    assert spec["taints"] == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    assert spec["startupTaints"] == [{"key": "agent", "effect": "NoSchedule"}]


def test_prefer_no_schedule_taints_block_until_the_last_relaxation():
    soft = nodepool("soft", taints=[{"key": "spare", "effect": "PreferNoSchedule"}], weight=50)
    fallback = nodepool(
        "fallback", requirements=[{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["x"]}]
    )
    # The heavier pool is taken only once PreferNoSchedule is tolerated (the other pool has no types).
    result = solve([soft, fallback, pod("p")])
    assert [c.nodepool for c in result.nodeclaims] == ["soft"]
    result = solve([soft, nodepool("plain", weight=1), pod("p")])
    assert [c.nodepool for c in result.nodeclaims] == ["plain"]


def test_pools_are_tried_by_weight_then_name_descending_never_by_price():
    cheap = [instance_type("cheap", 4, 8, price=0.01)]
    dear = [instance_type("dear", 4, 8, price=9.0)]
    objects = [nodepool("a-cheap"), nodepool("b-dear"), pod("p")]
    result = solve(objects, per_pool={"a-cheap": cheap, "b-dear": dear})
    assert [c.nodepool for c in result.nodeclaims] == ["b-dear"]  # same weight: name descending
    objects = [nodepool("a-cheap", weight=10), nodepool("b-dear", weight=5), pod("p")]
    result = solve(objects, per_pool={"a-cheap": cheap, "b-dear": dear})
    assert [c.nodepool for c in result.nodeclaims] == ["a-cheap"]


def test_existing_nodes_are_used_before_launching():
    objects = [
        nodepool(),
        node("n1", cpu="4"),
        pod("running", cpu="3", node_name="n1"),
        pod("new", cpu="500m"),
    ]
    result = solve(objects)
    assert result.existing == {"default/new": "n1"}
    assert not result.nodeclaims
    # Larger pods are placed first: "big" takes the last CPU, "new" needs a new claim.
    result = solve([*objects, pod("big", cpu="1")])
    assert result.existing == {"default/big": "n1"}
    assert claim_pods(result) == [["default/new"]]


def test_existing_node_labels_are_strict_even_for_well_known_keys():
    objects = [nodepool(), node("n1", labels={}), pod("p", nodeSelector={"kubernetes.io/os": "linux"})]
    assert solve(objects).existing == {"default/p": "n1"}
    zone_less = node("n2")
    del zone_less["metadata"]["labels"][wk.ZONE]
    objects = [nodepool(), zone_less, pod("p", nodeSelector={wk.ZONE: "test-zone-1"})]
    result = solve(objects)
    assert not result.existing and len(result.nodeclaims) == 1


def test_initialized_nodes_are_preferred_over_uninitialized_ones():
    fresh = node("a-fresh")
    fresh["metadata"]["labels"].pop(wk.INITIALIZED)
    fresh["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    objects = [nodepool(), fresh, node("b-ready"), pod("p")]
    assert solve(objects).existing == {"default/p": "b-ready"}


def test_uninitialized_managed_nodes_ignore_startup_and_ephemeral_taints():
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "c1", "labels": {wk.NODEPOOL: "default"}},
        "spec": {
            "startupTaints": [{"key": "agent", "effect": "NoSchedule"}],
            "requirements": [],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        },
        "status": {
            "providerID": "test:///booting",
            "nodeName": "booting",
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "30"},
        },
    }
    booting = node(
        "booting",
        taints=[
            {"key": "agent", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        ],
    )
    booting["metadata"]["labels"].pop(wk.INITIALIZED)
    result = solve([nodepool(), claim, booting, pod("p")])
    assert result.existing == {"default/p": "booting"}
    # A taint that is neither a startup nor an ephemeral taint still repels the pod.
    booting["spec"]["taints"].append({"key": "dedicated", "effect": "NoSchedule"})
    result = solve([nodepool(), claim, booting, pod("p")])
    assert not result.existing


def test_in_flight_nodeclaims_take_pods_before_new_ones():
    in_flight = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "default-inflight",
            "labels": {
                wk.NODEPOOL: "default",
                wk.INSTANCE_TYPE: "large",
                wk.ZONE: "test-zone-1",
                wk.CAPACITY_TYPE: "spot",
            },
        },
        "spec": {"requirements": [], "nodeClassRef": {"group": "g", "kind": "K", "name": "n"}},
        "status": {
            "providerID": "test:///i-1",
            "capacity": {"cpu": "8", "memory": "16Gi", "pods": "60"},
            "allocatable": {"cpu": "7900m", "memory": "15Gi", "pods": "60"},
        },
    }
    result = solve([nodepool(), in_flight, *pods("p", 3, cpu="1")])
    assert result.existing == {f"default/p-{i}": "default-inflight" for i in range(3)}
    assert not result.nodeclaims


def test_nodepool_cpu_limit_counts_capacity_and_reserves_the_largest_option():
    # limit 8: the first claim might become an 8-vCPU type, so nothing is left for a second one.
    objects = [nodepool(limits={"cpu": "8"}), *pods("p", 2, cpu="1500m")]
    result = solve(objects, [instance_type("small", 2, 4), instance_type("large", 8, 16)])
    assert len(result.nodeclaims) == 1
    zonal = [
        pod(f"p-{zone}", cpu="1", nodeSelector={wk.ZONE: zone}) for zone in ("test-zone-1", "test-zone-2")
    ]
    objects = [nodepool(limits={"cpu": "10"}), *zonal]
    result = solve(objects, [instance_type("small", 2, 4), instance_type("large", 8, 16)])
    # The second claim (another zone, so not shared) may only use types within the 2 CPU left.
    assert [c.instance_type_options for c in result.nodeclaims] == [["small", "large"], ["small"]]


def test_nodepool_limits_count_existing_nodes_and_explain_the_block():
    objects = [
        nodepool(limits={"cpu": "4"}),
        node("n1", cpu="4"),
        pod("busy", cpu="3900m", node_name="n1"),
        pod("p", cpu="1"),
    ]
    result = solve(objects)
    assert not result.nodeclaims
    # Spoken of as usage: the existing node uses all 4 CPUs; nothing was reserved by this run.
    assert "cpu limit 4: existing nodes use 4, 0 left (the smallest instance type has" in result.pending["default/p"]


def test_a_limit_message_tells_usage_from_this_runs_reservations():
    """A 8 CPU limit with 4 CPUs in use and three 1-CPU pods, one per zone: two 2-CPU claims fit the 4 left; the
    third is refused, and the message tells the existing nodes' use from this run's reservations instead of
    calling what is left "remaining" as if the cluster used it."""
    objects = [
        nodepool(limits={"cpu": "8"}),
        node("n1", cpu="4"),
        pod("busy", cpu="3900m", node_name="n1"),
        *[pod(f"p{i}", cpu="1", nodeSelector={wk.ZONE: f"test-zone-{i + 1}"}) for i in range(3)],
    ]
    result = solve(objects, [instance_type("small", 2, 4), instance_type("large", 8, 16)])
    assert len(result.nodeclaims) == 2
    assert ("cpu limit 8: existing nodes use 4, NodeClaims planned in this run reserve 4 (each the largest instance "
            "type it may launch as), 0 left (the smallest instance type has 2)") in result.pending["default/p2"]


def test_an_explicit_zero_limit_blocks_the_pool_instead_of_meaning_no_limit():
    for limits in ({"cpu": "0"}, {"memory": "0Gi"}, {"nodes": "0"}):
        result = solve([nodepool(limits=limits), pod("p", cpu="1")])
        assert not result.nodeclaims, limits
        assert "limit" in result.pending["default/p"], limits


def test_node_count_limit_blocks_the_pool():
    objects = [
        nodepool(limits={"nodes": "1"}),
        node("n1", cpu="1"),
        pod("busy", cpu="900m", node_name="n1"),
        pod("p", cpu="1"),
    ]
    result = solve(objects)
    assert not result.nodeclaims
    assert "limits.nodes 1 reached" in result.pending["default/p"]


def test_nodes_being_deleted_still_count_against_limits_until_they_are_gone():
    """A deleting node runs (draining, its instance shutting down) until it is gone: it uses the pool's limits.
    So does a node marked as the candidate of a disruption command: it runs until its replacement is up and it
    is drained, so a replacement (or any other claim) never takes its room."""
    deleting = node("old", cpu="4")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:05:00Z"
    deleting["metadata"]["finalizers"] = [wk.TERMINATION_FINALIZER]
    blocked = solve([nodepool(limits={"nodes": "1"}), deleting, pod("p", cpu="1")])
    assert not blocked.nodeclaims and "limits.nodes 1 reached" in blocked.pending["default/p"]
    blocked = solve([nodepool(limits={"cpu": "6"}), deleting, pod("p", cpu="3")])
    assert not blocked.nodeclaims  # 4 CPU of the deleting node + any type that fits 3 CPU > 6
    freed = solve([nodepool(limits={"nodes": "1"}), pod("p", cpu="1")])
    assert len(freed.nodeclaims) == 1
    marked = ClusterState.from_manifests([nodepool(limits={"nodes": "1"}), node("old", cpu="4"), pod("p", cpu="1")])
    marked.mark_for_deletion("old")
    held = plan(marked, {"default": catalog()}, Settings(), NOW, names())
    assert not held.nodeclaims and "limits.nodes 1 reached" in held.pending["default/p"]


def test_max_pods_is_a_resource():
    result = solve(
        [nodepool(), *pods("tiny", 12, cpu="10m", memory="10Mi")],
        [instance_type("dense", 2, 4, 10), instance_type("big", 8, 16, 100)],
    )
    # 12 pods need 12 pod slots: only "big" holds them on one node.
    assert [c.instance_type_options for c in result.nodeclaims] == [["big"]]


def test_daemonset_overhead_shrinks_every_candidate_and_is_added_to_requests():
    objects = [nodepool(), daemonset("agent", cpu="1"), pod("p", cpu="1")]
    result = solve(objects)
    claim = result.nodeclaims[0]
    assert "small" not in claim.instance_type_options  # 2 CPU - 100m - 1 CPU daemon < 1 CPU
    assert claim.manifest()["spec"]["resources"]["requests"]["cpu"] == "2"


def test_daemonset_overhead_only_where_the_daemon_would_run():
    arm_only = daemonset("arm-agent", cpu="3", nodeSelector={wk.ARCH: "arm64"})
    result = solve([nodepool(), arm_only, pod("p", cpu="1")])
    assert result.nodeclaims[0].instance_type_options[0] == "small"
    assert result.nodeclaims[0].manifest()["spec"]["resources"]["requests"]["cpu"] == "1"


def test_host_ports_conflict_with_each_other_and_with_daemons():
    def ported(name: str) -> dict:
        container = {"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}],
                     "resources": {"requests": {"cpu": "100m"}}}
        return pod(name, containers=[container])

    result = solve([nodepool(), ported("a"), ported("b")])
    assert claim_pods(result) == [["default/a"], ["default/b"]]
    daemon = daemonset("proxy", containers=[{"name": "d", "ports": [{"containerPort": 80, "hostPort": 80}]}])
    result = solve([nodepool(), daemon, ported("a")])
    assert not result.nodeclaims
    assert "default/a" in result.pending


def test_min_values_strict_and_best_effort():
    pool = nodepool(
        requirements=[
            {
                "key": wk.INSTANCE_TYPE,
                "operator": "In",
                "values": ["small", "medium", "large"],
                "minValues": 3,
            }
        ]
    )
    strict = solve([pool, pod("p", cpu="3")])
    assert not strict.nodeclaims and "minValues" in strict.pending["default/p"]
    best = solve([pool, pod("p", cpu="3")], settings=Settings(min_values_policy="BestEffort"))
    manifest = best.nodeclaims[0].manifest()
    assert manifest["metadata"]["annotations"][wk.MIN_VALUES_RELAXED] == "true"
    assert requirement(manifest, wk.INSTANCE_TYPE)["minValues"] == 2
    fine = solve([pool, pod("p", cpu="1")])
    assert fine.nodeclaims[0].manifest()["metadata"]["annotations"][wk.MIN_VALUES_RELAXED] == "false"


def test_best_effort_keeps_a_pool_whose_types_cannot_meet_min_values():
    """Six distinct types asked for, the catalogue has five: Strict drops the pool, BestEffort keeps it and
    relaxes minValues to what its options offer (upstream filters pools only under Strict)."""
    pool = nodepool(requirements=[{"key": wk.INSTANCE_TYPE, "operator": "Exists", "minValues": 6}])
    strict = solve([pool, pod("p", cpu="1")])
    assert not strict.nodeclaims and "minValues" in strict.pending["default/p"]
    best = solve([pool, pod("p", cpu="1")], settings=Settings(min_values_policy="BestEffort"))
    manifest = best.nodeclaims[0].manifest()
    assert manifest["metadata"]["annotations"][wk.MIN_VALUES_RELAXED] == "true"
    assert requirement(manifest, wk.INSTANCE_TYPE)["minValues"] == len(best.nodeclaims[0].instance_type_options)


def test_instance_type_options_are_truncated_to_the_setting():
    types = [instance_type(f"t{i:03d}", 4, 8, price=1 + i / 100) for i in range(20)]
    result = solve([nodepool(), pod("p")], types, Settings(max_instance_types=5))
    assert result.nodeclaims[0].instance_type_options == ["t000", "t001", "t002", "t003", "t004"]


def test_extended_resources_select_types_that_offer_them():
    result = solve([nodepool(), pod("trainer", extra_requests={"nvidia.com/gpu": "1"})])
    assert result.nodeclaims[0].instance_type_options == ["gpu"]


def test_pending_reason_names_the_resource_shortfall_with_numbers():
    result = solve([nodepool(), pod("huge", cpu="64")])
    reason = result.pending["default/huge"]
    assert "no instance type has enough resources" in reason
    assert "cpu 64" in reason and "7900m" in reason


def test_huge_cpu_request_gets_the_m_vs_M_hint():
    result = solve([nodepool(), pod("typo", cpu="2M")])
    assert "m vs M typo" in result.pending["default/typo"]


def test_pods_requiring_no_karpenter_node_are_left_alone():
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": wk.NODEPOOL, "operator": "DoesNotExist"}]}
                ]
            }
        }
    }
    result = solve([nodepool(), pod("p", affinity=affinity)])
    assert not result.nodeclaims and "DoesNotExist" in result.pending["default/p"]
    assert not [e for e in result.events if e["object"] == "Pod/default/p"]


def test_restricted_selectors_are_ignored_with_an_event():
    result = solve([nodepool(), pod("p", nodeSelector={wk.HOSTNAME: "n1"})])
    assert not result.nodeclaims
    assert "restricted label kubernetes.io/hostname" in result.pending["default/p"]
    assert any(e["object"] == "Pod/default/p" for e in result.events)


def test_bound_and_daemonset_pods_are_not_provisioned_for():
    ds_pod = pod("ds-x", ownerReferences=[])
    ds_pod["metadata"]["ownerReferences"] = [
        {"kind": "DaemonSet", "name": "x", "uid": "1", "controller": True, "apiVersion": "apps/v1"}
    ]
    scheduled = pod("s")
    scheduled["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
    ]
    result = solve([nodepool(), ds_pod, scheduled])
    assert not result.nodeclaims


def test_catalog_without_pools_leaves_pods_pending_with_a_reason():
    result = solve([pod("p")])
    assert result.pending == {"default/p": "no NodePool exists"}


def test_catalog_sanity():
    assert [t.name for t in catalog()] == ["small", "medium", "large", "arm-medium", "gpu"]
