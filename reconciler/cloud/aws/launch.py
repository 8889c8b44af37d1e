"""One launch: launch templates for the chosen offerings, then CreateFleet and its errors.

Overrides are grouped per launch template, one template per (AMI, max pods, EFA
interfaces, capacity reservation): the AMI follows the instance type (architecture,
accelerator variant), the kubelet's max pods its ENI limits, a NodeClaim that requests
``vpc.amazonaws.com/efa`` gets one EFA interface per EFA the type supports, and a
reserved launch targets each reservation from its own template.
Fleet errors feed the unavailable-offerings cache whether or not something launched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.exceptions import HTTPClientError

from reconciler.cloud.aws import fleet as fleets
from reconciler.cloud.aws import netinterfaces
from reconciler.cloud.aws import tags as owned
from reconciler.cloud.aws.clients import AwsCaller, error_code
from reconciler.cloud.aws.ice import UnavailableOfferings
from reconciler.cloud.aws.instances import InstanceRecord
from reconciler.cloud.aws.launchtemplate import (
    NOT_FOUND_CODES,
    LaunchTemplateProvider,
    LaunchTemplateSpec,
    block_device_mappings,
    metadata_options,
)
from reconciler.cloud.aws.metrics import AWSMetrics
from reconciler.cloud.aws.nodeclass import ResolvedNodeClass, subnets_for_launch
from reconciler.cloud.aws.reservations import CapacityReservationProvider
from reconciler.cloud.aws.userdata import BootstrapOptions, ClusterInfo, render
from reconciler.cloud.types import (
    CloudError,
    InsufficientCapacityError,
    LaunchOutcomeUnknown,
    LaunchPendingError,
    LaunchRequest,
    Offering,
)
from reconciler.model import labels as wk

IDEMPOTENT_PARAMETER_MISMATCH = "IdempotentParameterMismatch"


@dataclass(slots=True)
class _Groups:
    """Launch templates of one fleet request and the overrides under each."""

    overrides: dict[str, list[fleets.Override]] = field(default_factory=dict)


class TemplateGone(Exception):
    """The launch template vanished between ensure and CreateFleet; retry once with a fresh one."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


@dataclass(slots=True)
class Launcher:
    caller: AwsCaller
    ec2: Any
    cluster: ClusterInfo
    unavailable: UnavailableOfferings
    launch_templates: LaunchTemplateProvider
    now: Callable[[], datetime]
    metrics: AWSMetrics = field(default_factory=lambda: AWSMetrics.of(None))
    reservations: CapacityReservationProvider | None = None
    # The ReservedCapacity gate: templates say which capacity reservation (or none) a launch may use.
    targeted: bool = True

    async def launch_templates_for(
        self,
        request: LaunchRequest,
        resolved: ResolvedNodeClass,
        capacity_type: str,
        chosen: list[fleets.Candidate],
    ) -> _Groups:
        subnets = subnets_for_launch(
            resolved.subnets, {c.offering.zone for c in chosen}, self.unavailable.is_subnet_unavailable
        )
        tags = owned.launch_tags(self.cluster.name, request.nodepool, resolved.name, resolved.user_tags)
        groups = _Groups()
        specs: dict[tuple[str, int, int, str], str] = {}
        wants_efa = request.requests.amount(netinterfaces.EFA_RESOURCE) > 0
        for candidate in chosen:
            instance_type = candidate.instance_type
            ami = resolved.amis.for_labels(instance_type.labels) if resolved.amis else None
            subnet = subnets.get(candidate.offering.zone)
            if ami is None or subnet is None:
                continue
            max_pods = instance_type.capacity.amount("pods") // 1000
            efa_count = instance_type.capacity.amount(netinterfaces.EFA_RESOURCE) // 1000 if wants_efa else 0
            # One template per reservation: each targets its own (CreateFleet cannot say which per override).
            reserved = candidate.offering if capacity_type == wk.CAPACITY_TYPE_RESERVED else None
            key = (ami.id, max_pods, efa_count, reserved.reservation_id if reserved is not None else "")
            if key not in specs:
                template = self.template_spec(
                    request, resolved, capacity_type, ami.id, max_pods, efa_count, tags, reservation=reserved
                )
                specs[key] = await self.launch_templates.ensure(template)
            groups.overrides.setdefault(specs[key], []).append(
                fleets.Override(
                    instance_type.name, candidate.offering.zone, subnet.id, ami.id, candidate.offering.price
                )
            )
        if not groups.overrides:
            raise InsufficientCapacityError(
                f"NodeClaim {request.nodeclaim}: no compatible AMI or subnet for the remaining offerings"
            )
        return groups

    def template_spec(
        self,
        request: LaunchRequest,
        resolved: ResolvedNodeClass,
        capacity_type: str,
        image_id: str,
        max_pods: int,
        efa_count: int,
        tags: dict[str, str],
        *,
        reservation: Offering | None = None,
    ) -> LaunchTemplateSpec:
        """The launch template for one (AMI, max pods, EFA count, capacity reservation) group of a launch.

        ``reservation``: the reserved offering a reserved launch targets. With the ReservedCapacity gate
        (``targeted``) every other launch says ``CapacityReservationPreference: none``, out of open ODCRs.
        """
        spec = resolved.spec
        bootstrap = BootstrapOptions(
            labels={**request.labels, wk.NODEPOOL: request.nodepool},
            taints=[*request.taints, *request.startup_taints],
            max_pods=max_pods,
            kubelet=spec.get("kubelet") or {},
            custom=spec.get("userData"),
            instance_store_policy=spec.get("instanceStorePolicy"),
            ami_version=resolved.ami_version,
        )
        security_groups = tuple(g.id for g in resolved.security_groups)
        interfaces = netinterfaces.network_interfaces(
            security_groups=security_groups,
            efa_count=efa_count,
            nodeclass_interfaces=spec.get("networkInterfaces"),
            ip_prefix_count=spec.get("ipPrefixCount"),
            ipv6=self.cluster.ipv6,
            associate_public_ip=spec.get("associatePublicIPAddress"),
            conntrack=netinterfaces.connection_tracking(spec.get("connectionTracking")),
        )
        nested = (spec.get("cpuOptions") or {}).get("nestedVirtualization")
        return LaunchTemplateSpec(
            image_id=image_id,
            user_data=render(resolved.family, self.cluster, bootstrap),
            instance_profile=resolved.instance_profile,
            security_group_ids=security_groups,
            block_device_mappings=tuple(block_device_mappings(spec, resolved.family)),
            metadata_options=metadata_options(spec.get("metadataOptions"), ipv6=self.cluster.ipv6),
            tags=tags,
            detailed_monitoring=bool(spec.get("detailedMonitoring")),
            spot=capacity_type == "spot",
            network_interfaces=tuple(interfaces) if interfaces else None,
            cpu_options={"NestedVirtualization": nested} if nested else None,
            placement=resolved.placement(),
            capacity_reservation=(
                (reservation.reservation_id if reservation is not None else "none") if self.targeted else ""
            ),
            market_type=_market_type(reservation) if reservation is not None else "",
        )

    async def create_fleet(
        self,
        request: LaunchRequest,
        resolved: ResolvedNodeClass,
        capacity_type: str,
        groups: _Groups,
        chosen: Sequence[fleets.Candidate] = (),
    ) -> tuple[InstanceRecord, str]:
        """``chosen``: the offerings the overrides came from (a reserved launch maps its instance back to the
        reservation it landed in)."""
        reserved = capacity_type == wk.CAPACITY_TYPE_RESERVED
        tags = owned.launch_tags(
            self.cluster.name,
            request.nodepool,
            resolved.name,
            resolved.user_tags,
            nodeclaim=request.nodeclaim,
        )
        body = fleets.create_fleet_request(
            capacity_type,
            groups.overrides,
            owned.tag_specifications(["instance", "volume", "fleet"], tags),
            context=resolved.spec.get("context"),
            client_token=request.client_token,
            target=fleets.target_capacity_type(capacity_type, chosen),
            prioritized=request.price_overlaid,
        )
        all_overrides = [o for overrides in groups.overrides.values() for o in overrides]
        try:
            answer = await self.caller.call(self.ec2.create_fleet, **body)
        except Exception as err:
            code = error_code(err)
            if code == IDEMPOTENT_PARAMETER_MISMATCH:
                # This token launched already, from other parameters (a replica before a restart chose other
                # offerings): that instance exists, not yet visible to a tag search. Wait for it.
                raise LaunchPendingError(
                    f"NodeClaim {request.nodeclaim}: a launch with token {request.client_token} was already made; "
                    "waiting for its instance to become visible") from None
            if isinstance(err, (HTTPClientError, BotoConnectionError)):
                raise LaunchOutcomeUnknown(
                    f"CreateFleet for NodeClaim {request.nodeclaim}: no answer ({err!r}); an instance may exist"
                ) from None
            if code in NOT_FOUND_CODES:
                raise TemplateGone(next(iter(groups.overrides))) from None
            if code == fleets.SPOT_SLR_MISSING:
                self.unavailable.mark_capacity_type_unavailable("spot")
                raise InsufficientCapacityError(
                    "spot capacity unavailable: the EC2 Spot service-linked role is missing",
                    [(o.instance_type, o.zone, capacity_type) for o in all_overrides],
                ) from None
            if code in fleets.ICE_ERROR_CODES:
                for o in all_overrides:
                    self._mark_unavailable(capacity_type, o.instance_type, o.zone, code, chosen)
                raise InsufficientCapacityError(
                    f"CreateFleet: {code}", [(o.instance_type, o.zone, capacity_type) for o in all_overrides]
                ) from None
            raise CloudError(f"CreateFleet failed for NodeClaim {request.nodeclaim}: {code}: {err}") from None
        launched, errors = fleets.parse_fleet_response(answer, capacity_type, all_overrides)
        if reserved:  # EC2 reports a targeted launch's errors as on-demand (or capacity-block) ones
            errors = [replace(e, capacity_type=wk.CAPACITY_TYPE_RESERVED) for e in errors]
        self._record_fleet_errors(errors, resolved, chosen)
        if not launched:
            if errors and all(e.is_capacity_error or e.code == fleets.SPOT_SLR_MISSING for e in errors):
                raise InsufficientCapacityError(
                    f"NodeClaim {request.nodeclaim}: insufficient capacity in all {len(all_overrides)} offerings",
                    [(e.instance_type, e.zone, e.capacity_type) for e in errors],
                )
            reasons = (
                ", ".join(sorted({f"{e.code}: {e.message}" for e in errors})) or "no instance and no error"
            )
            raise CloudError(f"CreateFleet launched nothing for NodeClaim {request.nodeclaim}: {reasons}")
        first, extra = launched[0], launched[1:]
        if extra:  # capacity 1 should never give more; never leak what we did not ask for
            await self.caller.call(self.ec2.terminate_instances, InstanceIds=[i.instance_id for i in extra])
        landed = _reserved_offering(chosen, first.instance_type, first.zone) if reserved else None
        if landed is not None and self.reservations is not None:
            self.reservations.mark_launched(landed.reservation_id)
        record = InstanceRecord(
            capacity_reservation_id=landed.reservation_id if landed is not None else "",
            reservation_type=(landed.reservation_type or wk.RESERVATION_TYPE_DEFAULT) if landed is not None else "",
            interruptible=landed.interruptible if landed is not None else False,
            id=first.instance_id,
            instance_type=first.instance_type,
            zone=first.zone,
            capacity_type=wk.CAPACITY_TYPE_RESERVED if reserved else first.capacity_type,
            state="pending",
            launch_time=self.now(),
            image_id=first.image_id,
            subnet_id=first.subnet_id,
            security_group_ids=tuple(g.id for g in resolved.security_groups),
            tags=tags,
        )
        zone_id = next((s.zone_id for s in resolved.subnets if s.zone == first.zone and s.zone_id), "")
        return record, zone_id

    def _mark_unavailable(
        self, capacity_type: str, instance_type: str, zone: str, code: str, chosen: Sequence[fleets.Candidate]
    ) -> None:
        """A reserved launch that failed marks the reservation full, not the offering (upstream)."""
        if capacity_type != wk.CAPACITY_TYPE_RESERVED:
            self.unavailable.mark_unavailable(capacity_type, instance_type, zone, code)
            return
        offering = _reserved_offering(chosen, instance_type, zone)
        if offering is not None:
            self.unavailable.mark_reservation_unavailable(offering.reservation_id)
            if self.reservations is not None:
                self.reservations.mark_unavailable(offering.reservation_id)

    def _record_fleet_errors(
        self, errors: list[fleets.FleetError], resolved: ResolvedNodeClass, chosen: Sequence[fleets.Candidate] = ()
    ) -> None:
        for error in errors:
            subnet = next((s for s in resolved.subnets if s.id == error.subnet_id), None) or next(
                (s for s in resolved.subnets if s.zone == error.zone), None)
            self.metrics.instance_launch_failures.labels(
                zone=error.zone,
                zone_id=subnet.zone_id if subnet is not None and subnet.zone_id else "",
                capacity_type=error.capacity_type,
                reason=launch_failure_reason(error.code, error.message),
            ).inc()
            if error.code == fleets.SPOT_SLR_MISSING:
                self.unavailable.mark_capacity_type_unavailable("spot")
            elif error.is_capacity_error and error.instance_type and error.zone:
                self._mark_unavailable(error.capacity_type, error.instance_type, error.zone, error.code, chosen)
            if error.code == fleets.SUBNET_EXHAUSTED and error.subnet_id:
                self.unavailable.mark_subnet_unavailable(error.subnet_id)


def _reserved_offering(chosen: Sequence[fleets.Candidate], instance_type: str, zone: str) -> Offering | None:
    """The reservation a reserved launch of ``instance_type`` in ``zone`` targeted (one per pool, by filter)."""
    return next(
        (c.offering for c in chosen
         if c.instance_type.name == instance_type and c.offering.zone == zone and c.offering.reservation_id),
        None,
    )


def _market_type(offering: Offering) -> str:
    if offering.reservation_type == wk.RESERVATION_TYPE_CAPACITY_BLOCK:
        return "capacity-block"
    return "interruptible-capacity-reservation" if offering.interruptible else ""


# Karpenter's reasons for a failed fleet offering (its errors.ToReasonMessage), first match wins; capacity
# errors come last so a mixed batch reports the specific cause. Anything else is "LaunchFailed".
_LAUNCH_FAILURE_REASONS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("AuthFailure.ServiceLinkedRoleCreationNotPermitted",), "SpotSLRCreationFailed"),
    (("Not authorized for images",), "AMIAuthorizationFailure"),
    (("UnauthorizedOperation", "AccessDenied", "AuthFailure"), "Unauthorized"),
    (("iamInstanceProfile.name is invalid",), "InstanceProfileNameInvalid"),
    (("InvalidLaunchTemplateId.NotFound",), "LaunchTemplateNotFound"),
    (("User data is limited to",), "UserDataSizeLimitExceeded"),
    (("InvalidAMIID.Malformed",), "InvalidAMIID"),
    (("InvalidAMIID.NotFound",), "AMINotFound"),
    (("RequestLimitExceeded",), "RequestLimitExceeded"),
    (("InternalError",), "InternalError"),
    (("not eligible for Free Tier",), "FreeTierIneligible"),
    (("MaxFleetCountExceeded",), "FleetQuotaExceeded"),
    (("PendingVerification",), "AccountPendingVerification"),
    (("MaxSpotInstanceCountExceeded",), "SpotQuotaExceeded"),
    (("VcpuLimitExceeded",), "VCPULimitExceeded"),
    (("InsufficientFreeAddressesInSubnet",), "InsufficientFreeAddressesInSubnet"),
)


def launch_failure_reason(code: str, message: str) -> str:
    text = f"{code}: {message}"
    if "InvalidParameter" in text and "belong to different networks" in text:
        return "SecurityGroupSubnetVPCMismatch"
    for needles, reason in _LAUNCH_FAILURE_REASONS:
        if any(needle in text for needle in needles):
            return reason
    return "LaunchFailed"
