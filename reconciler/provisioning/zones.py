"""A pending pod's effective zone, as Karpenter's ``scheduler_pending_pods_by_effective_zone_count`` reports it.

The zones the pod may use by its own zone requirement (nodeSelector and its first required node-affinity
term, Karpenter's strict requirements) and by its volumes (the union of their alternatives): one zone → its
name, several or unconstrained → ``flexible``, none → ``none``. Karpenter also intersects the domains a
zonal topology spread leaves open; Adze leaves spread out (such pods count as ``flexible``).
"""

from __future__ import annotations

from reconciler.model import labels as wk
from reconciler.model.pod import Pod
from reconciler.model.requirements import IN, Requirement, Requirements
from reconciler.scheduling.volumes import volume_requirements
from reconciler.state.cluster import ClusterState

FLEXIBLE = "flexible"
NONE = "none"


def effective_zone(pod: Pod, state: ClusterState) -> str:
    requirements = Requirements.from_labels(pod.node_selector)
    zone = requirements.get(wk.ZONE)
    if pod.required_terms:
        term_zone = pod.required_terms[0].requirements.get(wk.ZONE)
        if term_zone is not None:
            zone = term_zone if zone is None else zone.intersection(term_zone)
    volume_zone = _volume_zones(pod, state)
    if zone is not None and zone.operator == IN:
        candidates = zone.values
    elif volume_zone is not None:
        candidates = volume_zone.values
    else:
        return FLEXIBLE
    matched = sorted(z for z in candidates if (zone is None or zone.has(z))
                     and (volume_zone is None or volume_zone.has(z)))
    if len(matched) == 1:
        return matched[0]
    return FLEXIBLE if matched else NONE


def _volume_zones(pod: Pod, state: ClusterState) -> Requirement | None:
    """The union of the zones the pod's volume alternatives allow; None when a volume does not pin zones."""
    try:
        alternatives = volume_requirements(pod, state)
    except Exception:  # an unresolvable volume is the scheduler's to report, not this metric's
        return None
    if not alternatives:
        return None
    zones: set[str] = set()
    for alternative in alternatives:
        requirement = alternative.get(wk.ZONE)
        if requirement is None or requirement.operator != IN:
            return None
        zones |= requirement.values
    return Requirement(wk.ZONE, False, frozenset(zones))
