"""A Node's or NodeClaim's parse kept across writes equals a fresh parse (issue 27).

With ``immutable_manifests`` the state takes each value a write left alone (the same object in the in-memory API
server's new version) from the last version's parse. Random write sequences through ``MemoryKube`` (merge patches
of the object and of its status, whole replaces, deletions with finalizers) must leave every kept parse, and every
StateNode built from them, equal to one parsed from scratch.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_model_state import claim, node, pod

from reconciler.kube.api import NODE, NODECLAIM, POD, Kind, WatchEvent
from reconciler.kube.memory import MemoryKube
from reconciler.model.node import Node, NodeClaim
from reconciler.model.resources import Resources
from reconciler.state.cluster import ClusterState

TIMES = ("2026-01-01T00:00:00Z", "2026-01-02T03:04:05Z", None)
QUANTITIES = ({"cpu": "4", "memory": "8Gi", "pods": "58"}, {"cpu": "3800m", "memory": "7Gi"}, None)
CONDITIONS = (
    [{"type": "Launched", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    [{"type": "Launched", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
     {"type": "Initialized", "status": "False", "reason": "NotReady", "message": "waiting"}],
    [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"}],
    [{"type": "Launched", "status": "False", "reason": "Pending", "lastTransitionTime": "2026-01-02T03:04:05Z"},
     {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"}],
    [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"},
     {"type": "Ready", "status": "False", "reason": "KubeletDown"}],
    # Not all strings: equal values that read differently (1 == True, str(1) != str(True)).
    [{"type": "Launched", "status": True}],
    [{"type": "Launched", "status": 1}],
    [],
)
LABELS = (
    {"karpenter.sh/nodepool": "default"},
    {"karpenter.sh/nodepool": "other", "failure-domain.beta.kubernetes.io/zone": "z2"},
    None,
)
TAINTS = ([{"key": "agent", "effect": "NoSchedule"}], [{"key": "gone", "value": "x", "effect": "NoExecute"}], None)

# What one write changes: (section, key, values to choose from); a patch writes ``{section: {key: value}}``.
FIELDS: dict[str, list[tuple[str, str, tuple[Any, ...]]]] = {
    "Node": [
        ("metadata", "labels", LABELS),
        ("metadata", "annotations", ({"a": "1"}, {"a": "2", "b": "3"}, None)),
        ("metadata", "finalizers", (["karpenter.sh/termination"], None)),
        ("spec", "taints", TAINTS),
        ("spec", "unschedulable", (True, None)),
        ("status", "capacity", QUANTITIES),
        ("status", "allocatable", QUANTITIES),
        ("status", "conditions", CONDITIONS),
    ],
    "NodeClaim": [
        ("metadata", "labels", LABELS),
        ("metadata", "annotations", ({"karpenter.sh/nodepool-hash": "1"}, {"a": "2"}, None)),
        ("metadata", "finalizers", (["karpenter.sh/termination"], None)),
        ("spec", "taints", TAINTS),
        ("spec", "expireAfter", ("720h", None)),
        ("status", "providerID", ("aws:///i-0", "aws:///i-1", None)),
        ("status", "nodeName", ("n0", "n1", None)),
        ("status", "capacity", QUANTITIES),
        ("status", "allocatable", QUANTITIES),
        ("status", "conditions", CONDITIONS),
        ("status", "lastPodEventTime", TIMES),
        ("status", "imageID", ("ami-1", None)),
    ],
}
KINDS = {"Node": NODE, "NodeClaim": NODECLAIM}
NAMES = {"Node": ("n0", "n1"), "NodeClaim": ("c0", "c1")}

KEYS = sorted({key for fields in FIELDS.values() for _, key, _ in fields})
OPERATIONS = ("patch", "patch", "patch", "replace", "replace", "delete", "create", "pod")
# (operation, kind, which name, which key, which value, to the status subresource); conditions are written most
# often (a condition set rewrites the list).
write = st.tuples(st.sampled_from(OPERATIONS), st.sampled_from(sorted(KINDS)), st.integers(0, 1),
                  st.sampled_from((*KEYS, "conditions", "conditions", "conditions")), st.integers(0, 8), st.booleans())


async def watched() -> tuple[MemoryKube, ClusterState]:
    """An in-memory API server holding NodeClaim c0 and Node n0, and a state fed by its every write."""
    kube = MemoryKube(seed=1)
    state = ClusterState(immutable_manifests=True)
    kube.subscribe(lambda kind, event: (state.remove if event.type == "DELETED" else state.upsert)(event.object),
                   copy=False)
    await kube.create(initial("NodeClaim", "c0"))
    await kube.create(initial("Node", "n0"))
    return kube, state


def initial(kind: str, name: str) -> dict[str, Any]:
    if kind == "Node":
        return node(name, f"aws:///i-{name[-1]}")
    manifest = claim(name, f"aws:///i-{name[-1]}", initialized=True)
    manifest["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    return manifest


async def play(kube: MemoryKube, move: tuple[Any, ...]) -> None:
    if move[0] == "pod":
        await kube.create(pod(f"p{kube.resource_version}", ("n0", "n1", "c0", "")[move[4] % 4]))
        return
    kind_name, name = move[1], NAMES[move[1]][move[2]]
    kind = KINDS[kind_name]
    stored = kube.peek(kind, name)
    if move[0] == "create":
        if stored is None:
            await kube.create(initial(kind_name, name))
        return
    if stored is None:
        return
    if move[0] == "delete":
        await kube.delete(kind, name)
        return
    found = [(section, values) for section, key, values in FIELDS[kind_name] if key == move[3]]
    if not found:
        return
    [(section, values)] = found
    key, value = move[3], values[move[4] % len(values)]
    status_write = section == "status"
    if move[0] == "patch":
        # Half the status writes go to the main resource (ignored there, as on a real server).
        subresource = "status" if status_write and move[5] else None
        await kube.patch(kind, name, {section: {key: value}}, subresource=subresource)
    else:
        body = {**stored, section: {**(stored.get(section) or {}), key: value}}
        if value is None:
            del body[section][key]
        await kube.replace(body, subresource="status" if status_write and move[5] else None)


def assert_parses_fresh(state: ClusterState, kube: MemoryKube) -> None:
    stored_nodes = {m["metadata"]["name"]: m for m in kube.objects(NODE)}
    stored_claims = {m["metadata"]["name"]: m for m in kube.objects(NODECLAIM)}
    assert state.node_manifests == stored_nodes and state.nodeclaim_manifests == stored_claims
    assert state.nodes == {name: Node.from_manifest(m) for name, m in stored_nodes.items()}
    assert state.nodeclaims == {name: NodeClaim.from_manifest(m) for name, m in stored_claims.items()}
    rebuilt = ClusterState.from_manifests(kube.objects())
    ours, theirs = state.state_nodes(), rebuilt.state_nodes()
    assert [n.name for n in ours] == [n.name for n in theirs]
    for kept, fresh in zip(ours, theirs, strict=True):
        assert (kept.node, kept.nodeclaim, kept.labels, kept.taints, kept.capacity, kept.allocatable) == (
            fresh.node, fresh.nodeclaim, fresh.labels, fresh.taints, fresh.capacity, fresh.allocatable)
        assert (kept.initialized, kept.managed, kept.nodepool, sorted(kept.pods)) == (
            fresh.initialized, fresh.managed, fresh.nodepool, sorted(fresh.pods))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(write, min_size=1, max_size=40))
@example([("patch", "NodeClaim", 0, "conditions", 0, True), ("patch", "NodeClaim", 0, "conditions", 3, True)])
@example([("patch", "Node", 0, "conditions", 6, True), ("patch", "Node", 0, "conditions", 7, True)])
def test_kept_parses_equal_fresh_ones_after_random_writes(moves: list[tuple[Any, ...]]) -> None:
    async def run() -> None:
        kube = MemoryKube(seed=1)
        state = ClusterState(immutable_manifests=True)

        def observe(kind: Kind, event: WatchEvent) -> None:
            (state.remove if event.type == "DELETED" else state.upsert)(event.object)

        kube.subscribe(observe, copy=False)
        for kind_name, names in NAMES.items():
            for name in names:
                await kube.create(initial(kind_name, name))
        for move in moves:
            await play(kube, move)
            assert_parses_fresh(state, kube)

    asyncio.run(run())


condition = st.fixed_dictionaries(
    {"type": st.sampled_from(("Launched", "Ready", "Initialized"))},
    optional={
        # Equal values that read differently (1 == True == 1.0; their strings differ) must not be taken as kept.
        "status": st.sampled_from(("True", "False", True, 1, 1.0)),
        "observedGeneration": st.sampled_from((1, 2, 1.0, True, None)),
        "reason": st.sampled_from(("", "Pending", "KubeletDown")),
        "lastTransitionTime": st.sampled_from(TIMES),
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.lists(condition, max_size=4), st.booleans()), min_size=2, max_size=10))
@example([([{"type": "Ready", "status": True}], False), ([{"type": "Ready", "status": 1}], False)])
@example([([{"type": "Ready", "status": 1}], False), ([{"type": "Ready", "status": 1.0}], False)])
def test_kept_conditions_equal_fresh_ones_after_condition_writes(writes: list[tuple[list[Any], bool]]) -> None:
    """Conditions rewritten as a list (duplicates of a type included) keep only the unchanged ones' parses."""

    async def run() -> None:
        kube, state = await watched()
        for conditions, on_node in writes:
            kind, name = (NODE, "n0") if on_node else (NODECLAIM, "c0")
            await kube.patch(kind, name, {"status": {"conditions": conditions}}, subresource="status")
            assert state.nodes["n0"] == Node.from_manifest(kube.peek(NODE, "n0") or {})
            assert state.nodeclaims["c0"] == NodeClaim.from_manifest(kube.peek(NODECLAIM, "c0") or {})

    asyncio.run(run())


def test_a_write_shares_the_parse_of_what_it_left_alone() -> None:
    """The kept parse is really used: a status write keeps the labels' and spec's parses, a label write the
    status's (so the test above compares kept values, not fresh ones)."""

    async def run() -> None:
        kube, state = await watched()
        await kube.patch(NODECLAIM, "c0", {"status": initial("NodeClaim", "c0")["status"]}, subresource="status")
        await kube.patch(NODE, "n0", {"status": initial("Node", "n0")["status"]}, subresource="status")
        claim_before, node_before = state.nodeclaims["c0"], state.nodes["n0"]
        await kube.patch(NODECLAIM, "c0", {"status": {"lastPodEventTime": TIMES[1]}}, subresource="status")
        await kube.patch(NODE, "n0", {"metadata": {"labels": {"extra": "1"}}})
        claim_after, node_after = state.nodeclaims["c0"], state.nodes["n0"]
        assert claim_after.last_pod_event_time is not None and "extra" in node_after.labels
        assert claim_after.labels is claim_before.labels and claim_after.conditions is claim_before.conditions
        assert claim_after.requirements is claim_before.requirements
        assert node_after.conditions is node_before.conditions and node_after.taints is node_before.taints
        assert node_after.capacity is node_before.capacity

    asyncio.run(run())


POD_FIELDS: list[tuple[str, str, tuple[Any, ...]]] = [
    ("metadata", "labels", ({"app": "a"}, {"app": "b", "tier": "web"}, None)),
    ("metadata", "annotations", ({"karpenter.sh/do-not-disrupt": "true"}, {"a": "1"}, None)),
    ("metadata", "ownerReferences", (
        [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1", "controller": True}],
        [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u2", "controller": True}],
        None,
    )),
    ("spec", "nodeName", ("n0", "n1", None)),
    ("status", "phase", ("Running", "Succeeded", None)),
    ("status", "startTime", TIMES),
    ("status", "conditions", ([{"type": "Ready", "status": "True"}],
                              [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}], None)),
]
pod_write = st.tuples(st.sampled_from(("patch", "patch", "patch", "create", "delete", "terminate")), st.integers(0, 2),
                      st.integers(0, len(POD_FIELDS) - 1), st.integers(0, 2), st.booleans())


async def play_pod(kube: MemoryKube, move: tuple[Any, ...]) -> None:
    operation, name = move[0], f"p{move[1]}"
    stored = kube.peek(POD, name, "default")
    if operation == "create":
        if stored is None:
            await kube.create(pod(name, "", owner="ReplicaSet" if move[4] else None, labels={"app": "a"}))
        return
    if stored is None:
        return
    if operation in ("delete", "terminate"):  # at once, or gracefully (a deletionTimestamp first)
        await kube.delete(POD, name, "default", grace_period_seconds=30 if operation == "terminate" else None)
        return
    section, key, values = POD_FIELDS[move[2]]
    subresource = "status" if section == "status" and move[4] else None
    await kube.patch(POD, name, {section: {key: values[move[3]]}}, "default", subresource=subresource)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pod_write, min_size=1, max_size=30))
def test_kept_pod_parses_equal_fresh_ones_after_random_writes(moves: list[tuple[Any, ...]]) -> None:
    async def run() -> None:
        kube = MemoryKube(seed=1)
        state = ClusterState(immutable_manifests=True)
        kube.subscribe(lambda kind, event: (state.remove if event.type == "DELETED" else state.upsert)(event.object),
                       copy=False)
        for index in range(3):
            await kube.create(pod(f"p{index}", "", labels={"app": "a"}))
        for move in moves:
            await play_pod(kube, move)
            assert state.pods == ClusterState.from_manifests(kube.objects(POD)).pods

    asyncio.run(run())


def test_pods_are_read_again_with_each_runtime_class_overhead() -> None:
    """The RuntimeClass overheads are kept between pod writes and read again when a RuntimeClass changes."""

    def runtime_class(cpu: str) -> dict[str, Any]:
        return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"},
                "handler": "kata", "overhead": {"podFixed": {"cpu": cpu}}}

    kata = pod("kata")
    kata["spec"]["runtimeClassName"] = "kata"
    state = ClusterState(immutable_manifests=True)
    written: list[dict[str, Any]] = []
    for change in (kata, runtime_class("250m"), {**kata, "status": {"phase": "Running"}}, runtime_class("500m"),
                   {"kind": "remove"}, {**kata, "status": {"phase": "Failed"}}):
        if change["kind"] == "remove":
            state.remove(runtime_class("500m"))
            written = [m for m in written if m["kind"] != "RuntimeClass"]
        else:
            state.upsert(change)
            written.append(change)
        # From scratch: the RuntimeClasses first, so no pod was ever read with other overheads.
        fresh = ClusterState.from_manifests(sorted(written, key=lambda m: m["kind"] != "RuntimeClass"))
        assert state.pods == fresh.pods
    assert state.pods["default/kata"].requests == Resources.of(cpu="100m")
