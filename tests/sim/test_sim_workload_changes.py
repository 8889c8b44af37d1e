"""The simulator's workload controllers visit only what changed, and do exactly what a full reconcile does.

``WorkloadControllers`` keeps the pods indexed by owner from the in-memory API server's writes and reconciles
only workloads whose object or pods changed, and for DaemonSets only the nodes that changed. The property drives
simulations with the same random writes — one reconciling incrementally, one always in full, one naming pods
without the in-memory store's shortcuts — and compares
their pods (names, order, nodes, annotations) after every reconcile, and the kept template hashes per owner (which
let a reconcile skip walking pods none of which is stale) with the hashes the owner's pods carry.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.kube.api import KINDS_BY_NAME, NODE, POD, NotFoundError
from reconciler.sim.runner import Simulation
from reconciler.sim.scenario import parse_scenario
from reconciler.sim.workloads import TEMPLATE_HASH_ANNOTATION, WorkloadControllers

NODES = ("w0", "w1", "w2")


def deployment(name: str, replicas: int, label: str = "v1") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name, "rev": label}},
                              "spec": {"containers": [{"name": "c", "image": "x",
                                                       "resources": {"requests": {"cpu": "100m"}}}]}}},
    }


def statefulset(name: str, replicas: int, label: str = "v1") -> dict[str, Any]:
    """A workload whose pods carry the simulation's template hash (a Deployment's pods do not)."""
    return {**deployment(name, replicas, label), "kind": "StatefulSet"}


def daemonset(label: str = "v1", selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "10m"}}}]}
    if selector:
        spec["nodeSelector"] = selector
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent", "rev": label}}, "spec": spec}},
    }


def node(name: str, role: str = "a") -> dict[str, Any]:
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "role": role}},
            "spec": {}, "status": {"capacity": resources, "allocatable": resources,
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


class _PlainKube:
    """The simulator's API server seen through no ``MemoryKube`` type: the controllers then name new pods the
    general way (the names of every kept pod, and a scan of the stored pods), which the store's own way must
    match."""

    def __init__(self, kube: Any) -> None:
        self._kube = kube

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kube, name)


def plain(sim: Simulation) -> Simulation:
    sim.workloads._kube = _PlainKube(sim.kube)  # type: ignore[assignment]
    return sim


def simulation(incremental: bool) -> Simulation:
    scenario = parse_scenario({
        "name": "workloads", "settings": {"clock": "2026-01-05T10:00:00Z"},
        "catalog": {"instanceTypes": [{"name": "t", "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                                       "offerings": [{"capacityType": "on-demand", "zone": "z", "price": 1}]}]},
        "objects": [deployment("web", 2), deployment("api", 1), statefulset("db", 2), daemonset(),
                    *(node(n) for n in NODES[:2])],
        "steps": [],
    })
    sim = Simulation(scenario)
    if not incremental:
        sim.workloads._changes = None
    return sim


def pods(sim: Simulation) -> list[tuple[Any, ...]]:
    return [(m["metadata"]["name"], (m.get("spec") or {}).get("nodeName"),
             sorted((m["metadata"].get("annotations") or {}).items()), (m["metadata"].get("labels") or {}).get("rev"))
            for m in sim.cluster.manifests("Pod")]


async def apply(sim: Simulation, move: tuple[Any, ...]) -> None:
    kube, kind = sim.kube, move[0]
    if kind in ("scale", "template"):
        deployment_kind = KINDS_BY_NAME["StatefulSet" if move[1] == "db" else "Deployment"]
        try:
            current = await kube.get(deployment_kind, move[1], "default")
        except NotFoundError:
            return  # deleted earlier in the run
        if kind == "scale":
            await kube.patch(deployment_kind, move[1], {"spec": {"replicas": move[2]}}, "default")
        else:
            changed = (statefulset if move[1] == "db" else deployment)(move[1], current["spec"]["replicas"], move[2])
            await kube.patch(deployment_kind, move[1], {"spec": {"template": changed["spec"]["template"]}}, "default")
    elif kind == "delete-pod":
        names = sorted(m["metadata"]["name"] for m in sim.cluster.manifests("Pod"))
        if names:
            name = names[move[1] % len(names)]
            namespace = next(m["metadata"]["namespace"] for m in sim.cluster.manifests("Pod")
                             if m["metadata"]["name"] == name)
            with contextlib.suppress(NotFoundError):
                await kube.delete(POD, name, namespace)
    elif kind == "bind":
        unbound = [m for m in sim.cluster.manifests("Pod") if not m["spec"].get("nodeName")]
        if unbound:
            target = unbound[move[1] % len(unbound)]
            await kube.patch(POD, target["metadata"]["name"], {"spec": {"nodeName": NODES[move[1] % 2]}},
                             target["metadata"]["namespace"])
    elif kind == "add-node":
        try:
            await kube.create(node(move[1], move[2]))
        except Exception:
            await kube.patch(NODE, move[1], {"metadata": {"labels": {"role": move[2]}}})
    elif kind == "drop-node":
        with contextlib.suppress(NotFoundError):
            await kube.delete(NODE, move[1])
    elif kind == "daemonset":
        current = await kube.get(KINDS_BY_NAME["DaemonSet"], "agent", "kube-system")
        await kube.replace({**daemonset(move[1], {"role": "a"} if move[2] else None),
                            "metadata": {**daemonset()["metadata"],
                                         "resourceVersion": current["metadata"]["resourceVersion"]}})
    elif kind == "drop-deployment":
        with contextlib.suppress(NotFoundError):
            await kube.delete(KINDS_BY_NAME["Deployment"], move[1], "default")


moves = st.lists(
    st.one_of(
        st.tuples(st.just("scale"), st.sampled_from(["web", "api", "db"]), st.integers(0, 4)),
        st.tuples(st.just("template"), st.sampled_from(["web", "api", "db"]), st.sampled_from(["v1", "v2"])),
        st.tuples(st.just("delete-pod"), st.integers(0, 50)),
        st.tuples(st.just("bind"), st.integers(0, 50)),
        st.tuples(st.just("add-node"), st.sampled_from(NODES), st.sampled_from(["a", "b"])),
        st.tuples(st.just("drop-node"), st.sampled_from(NODES)),
        st.tuples(st.just("daemonset"), st.sampled_from(["v1", "v2"]), st.booleans()),
        st.tuples(st.just("drop-deployment"), st.sampled_from(["web", "api"])),
    ),
    max_size=20,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(moves, st.lists(st.booleans(), min_size=20, max_size=20))
def test_incremental_reconciles_do_what_full_ones_do(steps: list[tuple[Any, ...]], reconcile_after: list[bool]) -> None:
    async def run() -> None:
        fast, full, general = simulation(True), simulation(False), plain(simulation(False))
        for sim in (fast, full, general):
            await sim.load()
            await sim.workloads.reconcile()
        assert pods(fast) == pods(full) == pods(general)
        for index, move in enumerate(steps):
            for sim in (fast, full, general):
                await apply(sim, copy.deepcopy(move))
            if reconcile_after[index]:
                for sim in (fast, full, general):
                    await sim.workloads.reconcile()
                assert pods(fast) == pods(full) == pods(general), move
                assert_hashes_kept(fast.workloads)
            else:
                assert_hashes_kept(fast.workloads)  # kept between reconciles too, from the writes alone
        for sim in (fast, full, general):
            await sim.workloads.reconcile()
        assert pods(fast) == pods(full) == pods(general)

    asyncio.run(run())


def assert_hashes_kept(workloads: WorkloadControllers) -> None:
    """The kept template hashes of every owner equal the hashes its pods carry, counted from scratch."""
    changes = workloads._changes
    assert changes is not None
    owners = {owner for owner in changes._hashes} | {owner for owner in changes._pods}
    for owner in owners:
        pods_now = changes.pods_of(owner)
        carried = {(p["metadata"].get("annotations") or {}).get(TEMPLATE_HASH_ANNOTATION) for p in pods_now}
        assert set(changes.template_hashes(owner)) == carried, owner
        assert sum(changes._hashes.get(owner, {}).values()) == len(pods_now), owner


def test_a_changed_statefulset_template_replaces_its_pods_when_reconciled_incrementally() -> None:
    """The walk skipped while no pod is stale still runs once the template changes (the kept hashes say so)."""
    async def run() -> None:
        fast, full = simulation(True), simulation(False)
        for sim in (fast, full):
            await sim.load()
            await sim.workloads.reconcile()
            await sim.workloads.reconcile()  # indexed: the fast one now reconciles incrementally
            await apply(sim, ("template", "db", "v2"))
            await sim.workloads.reconcile()
        assert pods(fast) == pods(full)
        revisions = sorted(rev for name, _, _, rev in pods(fast) if name.startswith("db-"))
        assert revisions == ["v2", "v2"]

    asyncio.run(run())


def test_daemonset_pods_for_several_new_nodes_come_in_node_order() -> None:
    async def run() -> None:
        fast, full = simulation(True), simulation(False)
        for sim in (fast, full):
            await sim.load()
            await sim.workloads.reconcile()
            for move in (("add-node", "w4", "a"), ("add-node", "w3", "a")):
                await apply(sim, move)
            await sim.workloads.reconcile()
        assert pods(fast) == pods(full)
        assert [name for name, *_ in pods(fast)][-2:] == ["agent-w4", "agent-w3"]

    asyncio.run(run())
