"""The first-fit's room index never changes a run (issue 27, the plan's speed).

Once three refusals are listed for a pod, a run asks only the existing nodes with room for the pod's requests
(``RoomIndex``) and those it already placed pods on; a node passed over gives its refusal only when a later try
lists it. These properties run random clusters (nodes of several sizes, tainted ones, host ports, pods that move
off removed nodes and nodes that take pending pods only) twice on one context — with the index and asking every
node as before — and compare every placement, every planned claim and every pending pod's explanation, which
names the first nodes that refused it and why.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sched_factories import NOW, catalog, node, nodepool, pod

from reconciler.scheduling import SchedulingContext
from reconciler.scheduling.room_index import RoomIndex
from reconciler.scheduling.scheduler import Scheduler
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

SIZES = (("2", "4Gi"), ("4", "8Gi"), ("8", "16Gi"))
CPUS = ("100m", "500m", "1", "1500m", "3", "7")
MEMORY = ("128Mi", "1Gi", "3Gi", "12Gi")
TAINT = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
PORT = [{"containerPort": 80, "hostPort": 80}]


def cluster(seed: int, nodes: int, pending: int) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [nodepool(limits={"cpu": str(rng.choice((8, 40, 400)))})]
    names = [f"n{i:02d}" for i in range(nodes)]
    for name in names:
        cpu, memory = rng.choice(SIZES)
        objects.append(node(name, cpu=cpu, memory=memory, taints=[TAINT] if rng.random() < 0.2 else None,
                            zone=rng.choice(("test-zone-1", "test-zone-2"))))
        for index in range(rng.randrange(4)):
            spec: dict[str, Any] = {}
            if rng.random() < 0.15:
                spec["containers"] = [{"name": "app", "image": "pause", "ports": PORT,
                                       "resources": {"requests": {"cpu": rng.choice(CPUS[:3]), "memory": "128Mi"}}}]
            objects.append(pod(f"{name}-p{index}", rng.choice(CPUS), rng.choice(MEMORY), node_name=name,
                               labels={"app": rng.choice("ab")}, **spec))
    for index in range(pending):
        spec = {}
        if rng.random() < 0.2:
            spec["tolerations"] = [TOLERATION]
        if rng.random() < 0.1:
            spec["containers"] = [{"name": "app", "image": "pause", "ports": PORT,
                                   "resources": {"requests": {"cpu": rng.choice(CPUS), "memory": "256Mi"}}}]
        objects.append(pod(f"pending-{index:02d}", rng.choice(CPUS), rng.choice(MEMORY),
                           labels={"app": rng.choice("ab")}, **spec))
    removed = rng.sample(names, k=min(len(names), rng.randrange(3)))
    quiet = rng.sample(names, k=min(len(names), rng.randrange(4)))
    return objects, removed, quiet


def outcome(context: SchedulingContext, removed: list[str], quiet: list[str], *, index: bool) -> tuple[Any, ...]:
    state = context.state
    moving = [p for p in state.pods.values() if p.node_name in removed]
    scheduler = Scheduler(context, NOW, exclude_nodes=removed, pending_only_nodes=quiet,
                          scheduling_pods={p.key for p in moving})
    if not index:
        scheduler._by_room = False  # every node asked in order, as before the index
    result = scheduler.solve([*state.pending_pods(), *moving])
    claims = tuple((tuple(c.pod_keys), tuple(c.instance_type_names)) for c in result.new_claims)
    return claims, tuple(sorted(result.existing.items())), tuple(sorted(result.errors.items()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), nodes=st.integers(1, 24), pending=st.integers(1, 30))
def test_runs_with_the_room_index_equal_runs_asking_every_node(seed: int, nodes: int, pending: int) -> None:
    objects, removed, quiet = cluster(seed, nodes, pending)
    state = ClusterState.from_manifests(objects)
    context = SchedulingContext.build(state, {"default": catalog()}, Settings())
    with_index = outcome(context, removed, quiet, index=True)
    # The same context again (shared slot bases and index), then a fresh one: the index holds no run's state.
    assert with_index == outcome(context, removed, quiet, index=False)
    fresh = SchedulingContext.build(ClusterState.from_manifests(objects), {"default": catalog()}, Settings())
    assert outcome(fresh, removed, quiet, index=False) == with_index


def test_a_full_cluster_asks_only_the_nodes_with_room() -> None:
    """Twenty full nodes and one with room: after three refusals the others are not asked."""
    objects: list[dict[str, Any]] = [nodepool()]
    for i in range(20):
        objects += [node(f"full-{i:02d}"), pod(f"full-{i:02d}-p", "3500m", node_name=f"full-{i:02d}")]
    objects += [node("roomy"), pod("new", "2")]
    state = ClusterState.from_manifests(objects)
    context = SchedulingContext.build(state, {"default": catalog()}, Settings())
    asked: list[str] = []
    scheduler = Scheduler(context, NOW)
    original = scheduler._try_base

    def counting(sp: Any, cls: Any, labels_key: Any, base: Any, *rest: Any) -> bool:
        asked.append(base.name)
        return original(sp, cls, labels_key, base, *rest)

    scheduler._try_base = counting  # type: ignore[method-assign]
    result = scheduler.solve(state.pending_pods())
    assert result.existing == {"default/new": "roomy"}
    assert asked == ["full-00", "full-01", "full-02", "roomy"]


@given(rooms=st.lists(st.dictionaries(st.sampled_from(["cpu", "memory", "pods"]), st.integers(-2, 6)), max_size=12),
       requests=st.dictionaries(st.sampled_from(["cpu", "memory", "pods"]), st.integers(0, 6)))
def test_room_index_lists_exactly_the_nodes_whose_room_holds_the_requests(
    rooms: list[dict[str, int]], requests: dict[str, int]
) -> None:
    class Base:
        def __init__(self, room: dict[str, int]) -> None:
            self.remaining = room

    bases = [Base(room) for room in rooms]
    index = RoomIndex(bases)  # type: ignore[arg-type]
    cpu = requests.get("cpu")
    assert index.with_cpu(requests) == [i for i, room in enumerate(rooms) if cpu is None or cpu <= room.get("cpu", 0)]
    expected = [i for i, room in enumerate(rooms) if all(v <= room.get(k, 0) for k, v in requests.items())]
    assert [i for i in index.with_cpu(requests) if index.holds(i, requests)] == expected
    assert index.with_room(requests) == expected
    assert index.with_room(requests) == expected  # the kept answer too
    reversed_order = dict(reversed(list(requests.items())))
    assert index.with_room(reversed_order) == expected
    assert [index.position(base) for base in bases] == list(range(len(bases)))  # type: ignore[arg-type]
    free = [b.remaining.get("cpu", 0) for b in index.by_free_cpu]
    assert free == sorted((room.get("cpu", 0) for room in rooms), reverse=True)


class _Base:
    """A slot base as the index reads it: a name and its room."""

    def __init__(self, name: str, room: dict[str, int]) -> None:
        self.name, self.remaining = name, room


def _same_index(made: RoomIndex, fresh: RoomIndex, bases: list[Any]) -> None:
    for cpu in (None, -1, 0, 1, 2, 3, 5, 8):
        requests = {} if cpu is None else {"cpu": cpu}
        assert made.with_cpu(requests) == fresh.with_cpu(requests)
        assert made.with_room({**requests, "memory": 2}) == fresh.with_room({**requests, "memory": 2})
        assert [made.holds(i, {"cpu": 1, "memory": 2}) for i in range(len(bases))] == \
            [fresh.holds(i, {"cpu": 1, "memory": 2}) for i in range(len(bases))]
    assert made.by_free_cpu == fresh.by_free_cpu
    assert [made.position(base) for base in bases] == list(range(len(bases)))


_ROOM = st.dictionaries(st.sampled_from(["cpu", "memory"]), st.integers(-1, 8))


@given(start=st.lists(_ROOM, min_size=1, max_size=10),
       steps=st.lists(st.one_of(
           st.tuples(st.just("room"), st.lists(st.tuples(st.integers(0, 99), _ROOM), max_size=4)),
           st.tuples(st.just("rename"), st.integers(0, 99)),
           st.tuples(st.just("drop"), st.integers(0, 99)),
           st.tuples(st.just("add"), _ROOM),
           st.tuples(st.just("move"), st.tuples(st.integers(0, 99), st.integers(0, 99))),
       ), max_size=12))
def test_room_index_after_a_change_equals_one_built_afresh(start: list[dict[str, int]], steps: list[Any]) -> None:
    """Each version of the nodes indexed from the last (``RoomIndex.after``) answers as one built from scratch,
    through random sequences of new rooms at the same places, renamed places, removed, added and moved nodes."""
    bases = [_Base(f"n{i}", room) for i, room in enumerate(start)]
    index = RoomIndex(bases)  # type: ignore[arg-type]
    made = len(start)
    for kind, change in steps:
        bases = list(bases)
        if kind == "room":
            for where, room in change:
                if bases:
                    place = where % len(bases)
                    bases[place] = _Base(bases[place].name, room)
        elif kind == "rename" and bases:
            place = change % len(bases)
            bases[place] = _Base(f"n{made}", bases[place].remaining)
            made += 1
        elif kind == "drop" and bases:
            del bases[change % len(bases)]
        elif kind == "add":
            bases.insert(len(change) % (len(bases) + 1), _Base(f"n{made}", change))
            made += 1
        elif kind == "move" and bases:
            bases.insert(change[1] % len(bases), bases.pop(change[0] % len(bases)))
        index = RoomIndex.after(index, bases)  # type: ignore[arg-type]
        _same_index(index, RoomIndex(bases), bases)  # type: ignore[arg-type]
