"""The AWS provider's periodic work on the leader: prices, instance types, launch-template and profile GC.

- On-demand prices (Pricing API ``GetProducts``) and spot prices
  (``DescribeSpotPriceHistory``): at start-up, then every 12 h, Karpenter's
  interval for both. The on-demand refresh is skipped with ``ISOLATED_VPC`` (no
  Pricing API endpoint) and in ``us-gov-*`` regions, as in Karpenter; the bundled
  table then stays in use. A refresh that prices nothing keeps the old prices
  and counts as a failure (retried with backoff).
- Instance types and offerings (``DescribeInstanceTypes`` +
  ``DescribeInstanceTypeOfferings``): every 12 h after start-up, so the
  provisioning path, which only refreshes them lazily once they are that old,
  never waits on it.
- Instance profiles: every 30 min (not with ``ISOLATED_VPC``), the managed profiles of EC2NodeClasses
  that no longer exist and that no instance uses (``InstanceProfileCollector``).
- Launch templates: every 5 min, this cluster's content-addressed templates
  (``karpenter.k8s.aws/<hash>``) that nothing needs are deleted: those of a
  deleted EC2NodeClass at once, the others once this leader has known them for a
  full pass and has not used them within the template cache's TTL (1 min, as in
  Karpenter). Templates of a node class with a NodeClaim still launching are kept.

Intervals are module constants (``RefreshSchedule``) until they become settings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler.cloud.aws import tags as owned
from reconciler.cloud.aws.launchtemplate import NAME_PREFIX
from reconciler.controllers.runtime.context import ControllerContext, ControllerLog
from reconciler.controllers.runtime.periodic import DEFAULT_RETRY_INITIAL, PeriodicTask, Sleep
from reconciler.kube.api import EC2NODECLASS, NODECLAIM, Manifest

if TYPE_CHECKING:
    from reconciler.cloud.aws.provider import AWSCloudProvider

log = ControllerLog("launchtemplate.garbagecollection")
HOUR = 3600.0


@dataclass(slots=True, frozen=True)
class RefreshSchedule:
    """Seconds between passes of each AWS refresh (Karpenter's values)."""

    on_demand_prices: float = 12 * HOUR
    spot_prices: float = 12 * HOUR
    instance_types: float = 12 * HOUR
    launch_template_gc: float = 5 * 60.0
    instance_profile_gc: float = 30 * 60.0
    retry_initial: float = DEFAULT_RETRY_INITIAL


class RefreshIncompleteError(RuntimeError):
    """The API answered but priced nothing: the old data stays and the pass is retried."""


def on_demand_refresh_disabled(region: str, isolated_vpc: bool) -> str:
    """Why the Pricing API is not called, or "" when it is."""
    if isolated_vpc:
        return "ISOLATED_VPC is set: the Pricing API is not reachable"
    if region.startswith("us-gov-"):
        return f"the Pricing API does not serve {region}"
    return ""


# --- launch templates --------------------------------------------------------------------------


def launching_nodeclasses(nodeclaims: Iterable[Manifest]) -> set[str]:
    """Node classes with a NodeClaim that has no instance recorded yet: a launch may be under way."""
    return {
        str(((claim.get("spec") or {}).get("nodeClassRef") or {}).get("name", ""))
        for claim in nodeclaims
        if not (claim.get("status") or {}).get("providerID")
    }


@dataclass(slots=True, frozen=True)
class TemplateVerdicts:
    unneeded: dict[str, str]  # template name -> why it can go
    first_seen: dict[str, float]  # when this leader first listed each kept template (monotonic seconds)


def unneeded_launch_templates(
    templates: Mapping[str, str],
    nodeclasses: Set[str],
    launching: Set[str],
    first_seen: Mapping[str, float],
    now: float,
    grace: float,
) -> TemplateVerdicts:
    """Which of this cluster's templates (name -> EC2NodeClass tag) nothing needs (pure).

    The caller still spares any template used within the cache TTL; ``grace`` keeps a
    restarted leader, whose cache is empty, from deleting templates its predecessor used.
    """
    unneeded: dict[str, str] = {}
    seen: dict[str, float] = {}
    for name, nodeclass in sorted(templates.items()):
        if not name.startswith(NAME_PREFIX) or nodeclass in launching:
            continue
        if nodeclass not in nodeclasses:
            unneeded[name] = f"EC2NodeClass {nodeclass!r} no longer exists" if nodeclass else "no EC2NodeClass tag"
            continue
        seen[name] = first_seen.get(name, now)
        if now - seen[name] >= grace:
            unneeded[name] = "unused"
    return TemplateVerdicts(unneeded, seen)


@dataclass(slots=True)
class LaunchTemplateCollector:
    ctx: ControllerContext
    provider: AWSCloudProvider
    grace: float
    _first_seen: dict[str, float] = field(default_factory=dict)

    async def collect_once(self) -> dict[str, Any]:
        """One pass; returns the facts to log (templates seen, deleted)."""
        listed = await self.provider.caller.paginate(
            self.provider.clients.ec2,
            "describe_launch_templates",
            "LaunchTemplates",
            Filters=[{"Name": f"tag:{owned.EKS_CLUSTER_NAME_TAG}", "Values": [self.provider.cluster]}],
        )
        # Listed before the NodeClaims, so a claim that starts launching in between is seen.
        templates = {
            str(t["LaunchTemplateName"]): owned.tags_of(t).get(owned.NODECLASS_TAG, "") for t in listed
        }
        nodeclaims, _ = await self.ctx.kube.list(NODECLAIM)
        nodeclasses, _ = await self.ctx.kube.list(EC2NODECLASS)
        verdicts = unneeded_launch_templates(
            templates,
            {str(n["metadata"]["name"]) for n in nodeclasses},
            launching_nodeclasses(nodeclaims),
            self._first_seen,
            self.ctx.clock.monotonic(),
            self.grace,
        )
        self._first_seen = verdicts.first_seen
        keep = [name for name in templates if name not in verdicts.unneeded]
        deleted = await self.provider.launch_templates.delete_unused(self.provider.cluster, keep)
        for name in deleted:
            self._first_seen.pop(name, None)
            log.info("deleted launch template", name=name, EC2NodeClass={"name": templates.get(name, "")},
                     reason=verdicts.unneeded.get(name, "unused"))
        return {"launch_templates": len(templates), "deleted": len(deleted)}


# --- instance profiles -------------------------------------------------------------------------


@dataclass(slots=True)
class InstanceProfileCollector:
    """Karpenter's instance-profile garbage collection (every 30 min; not with ISOLATED_VPC, no IAM endpoint):
    profiles managed for EC2NodeClasses that no longer exist and that no instance of the cluster uses. The
    finalizer deletes a class's profiles when the class goes; this catches classes deleted while no
    reconciler ran (the finalizer removed by hand)."""

    ctx: ControllerContext
    provider: AWSCloudProvider

    async def collect_once(self) -> dict[str, Any]:
        nodeclasses, _ = await self.ctx.kube.list(EC2NODECLASS)
        live_uids = {str(n["metadata"].get("uid", "")) for n in nodeclasses}
        in_use = {r.instance_profile for r in await self.provider.list_records() if r.instance_profile}
        deleted = await self.provider.nodeclasses.collect_orphaned_profiles(live_uids, in_use)
        for name in deleted:
            ControllerLog("instanceprofile.garbagecollection").info("deleted instance profile", name=name)
        return {"deleted": len(deleted)}


# --- the loops ---------------------------------------------------------------------------------


def aws_refresh_loops(
    ctx: ControllerContext,
    provider: AWSCloudProvider,
    *,
    isolated_vpc: bool = False,
    schedule: RefreshSchedule | None = None,
    sleep: Sleep = asyncio.sleep,
) -> dict[str, PeriodicTask]:
    """The periodic AWS tasks, by controller name, for ``Reconciler(extra_loops=...)``."""
    schedule = schedule or RefreshSchedule()
    pricing = provider.pricing

    async def refresh_on_demand() -> dict[str, Any]:
        priced = await pricing.refresh_on_demand(provider.caller, provider.clients.pricing)
        if not priced:
            raise RefreshIncompleteError("the Pricing API returned no prices for a query; previous prices kept")
        return {"instance_types": priced}

    async def refresh_spot() -> dict[str, Any]:
        priced = await pricing.refresh_spot(provider.caller, provider.clients.ec2, ctx.now())
        if not priced:
            raise RefreshIncompleteError("DescribeSpotPriceHistory returned no prices; previous prices kept")
        return {"offerings": priced}

    async def refresh_instance_types() -> dict[str, Any]:
        before = set(provider.instance_type_provider.infos)
        await provider.instance_type_provider.refresh()
        after = set(provider.instance_type_provider.infos)
        return {"instance_types": len(after), "added": len(after - before), "removed": len(before - after)}

    collector = LaunchTemplateCollector(ctx, provider, grace=schedule.launch_template_gc)
    options: dict[str, Any] = {"retry_initial": schedule.retry_initial, "sleep": sleep}
    loops = {
        "pricing.spot": PeriodicTask("pricing.spot", schedule.spot_prices, refresh_spot,
                                     message="refreshed spot prices", **options),
        "instancetype.refresh": PeriodicTask(
            "instancetype.refresh", schedule.instance_types, refresh_instance_types,
            message="refreshed instance types and offerings", run_at_start=False, **options),
        "launchtemplate.garbagecollection": PeriodicTask(
            "launchtemplate.garbagecollection", schedule.launch_template_gc, collector.collect_once,
            message="collected launch templates", **options),
    }
    if not isolated_vpc:
        loops["instanceprofile.garbagecollection"] = PeriodicTask(
            "instanceprofile.garbagecollection", schedule.instance_profile_gc,
            InstanceProfileCollector(ctx, provider).collect_once, message="collected instance profiles", **options)
    disabled = on_demand_refresh_disabled(provider.config.region, isolated_vpc)
    if disabled:
        ControllerLog("pricing.ondemand").info("on-demand price refresh disabled; using the bundled prices",
                                               reason=disabled)
    else:
        loops["pricing.ondemand"] = PeriodicTask("pricing.ondemand", schedule.on_demand_prices, refresh_on_demand,
                                                 message="refreshed on-demand prices", **options)
    return loops
