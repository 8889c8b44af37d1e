"""The LP lower bound the quality benchmarks compare a cluster's cost with.

The cheapest fractional mix of instance types whose allocatable covers every pod's requests (CPU, memory, pod
slots), with at least as many nodes as the largest group of pods kept apart by required hostname anti-affinity;
each type at its cheapest available offering among the capacity types allowed. It is a relaxation (a node may
be bought in part, a pod may be split across nodes), so no packing of whole nodes reaches it. Solved by scipy's
HiGHS; quantities are scaled to cores, GiB and pods: in Adze's milli-units the real catalogue's 24 TiB types
have coefficients HiGHS takes for infinite ("Model error").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence

from reconciler.cloud.types import InstanceType
from reconciler.model import labels as wk
from reconciler.model.pod import Pod

# Per resource, the unit the LP works in: Adze's quantities are milli-units (memory in milli-bytes).
SCALE = {"cpu": 1000.0, "memory": 1000.0 * 2**30, "pods": 1000.0}


def lower_bound(pods: Iterable[Pod], types: Sequence[InstanceType],
                capacity_types: Collection[str] | None = None) -> float:
    """The bound for ``pods`` on ``types`` (offerings of ``capacity_types`` only, when given)."""
    from scipy.optimize import linprog

    demand = dict.fromkeys(SCALE, 0.0)
    anti_affine: Counter[str] = Counter()
    for pod in pods:
        for resource in SCALE:
            demand[resource] += pod.scheduling_requests.amount(resource) / SCALE[resource]
        for term in pod.anti_affinity_required:
            if term.topology_key == wk.HOSTNAME and term.selector.matches(pod.labels):
                anti_affine[f"{pod.namespace}/{term.selector}"] += 1
    usable, cost = [], []
    for itype in types:
        prices = [o.price for o in itype.offerings
                  if o.available and (capacity_types is None or o.capacity_type in capacity_types)]
        if prices:
            usable.append(itype)
            cost.append(min(prices))
    # linprog minimizes c.x subject to A_ub x <= b_ub: write "capacity >= demand" as "-capacity <= -demand".
    rows = [[-t.allocatable.amount(r) / SCALE[r] for t in usable] for r in SCALE]
    bounds = [-demand[r] for r in SCALE]
    rows.append([-1.0] * len(usable))  # at least one node per mutually anti-affine pod
    bounds.append(-float(max(anti_affine.values(), default=0)))
    result = linprog(cost, A_ub=rows, b_ub=bounds, bounds=(0, None), method="highs")
    if not result.success:
        raise RuntimeError(f"LP failed: {result.message}")
    return float(result.fun)
