"""EC2NodeClass ``ValidationSucceeded``: can the controller actually launch with this class?

As Karpenter's validation controller does, once subnets, security groups, AMIs
and the instance profile resolve, three authorization checks run with the
class's real settings and ownership tags:

1. ``CreateLaunchTemplate`` for one instance type (a real template, the one a launch would use; EC2
   also rejects user data over its size limit here);
2. ``CreateFleet`` with ``DryRun=True`` over that template and every subnet;
3. ``RunInstances`` with ``DryRun=True``, one subnet at a time until one is allowed.

A dry run that would have succeeded answers ``DryRunOperation``; ``UnauthorizedOperation`` (or another
authorization failure) sets the condition False with upstream's reason. Results are kept 30 minutes
per class and everything they depend on; throttling and server errors are not kept (retried on the
next resolve). ``DISABLE_DRY_RUN`` skips the checks.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.cloud.aws import fleet as fleets
from reconciler.cloud.aws import tags as owned
from reconciler.cloud.aws.clients import AwsCaller, error_code
from reconciler.cloud.aws.launch import Launcher
from reconciler.cloud.aws.nodeclass import ResolvedNodeClass
from reconciler.cloud.aws.userdata import UserDataError
from reconciler.cloud.types import InstanceType, LaunchRequest

CACHE_SECONDS = 30 * 60.0
DRY_RUN_OK = "DryRunOperation"
# Types upstream validates with when nothing narrows the choice: one per architecture.
FALLBACK_TYPES = ("m5.large", "m6g.large")
AUTH_FAILURES = ("UnauthorizedOperation", "AccessDenied", "AccessDeniedException", "AuthFailure")
TRANSIENT = ("RequestLimitExceeded", "Throttling", "ThrottlingException", "InternalError", "InternalFailure",
             "ServiceUnavailable", "Unavailable")
LAUNCH_TEMPLATE_REASON = "CreateLaunchTemplateAuthCheckFailed"
CREATE_FLEET_REASON = "CreateFleetAuthCheckFailed"
RUN_INSTANCES_REASON = "RunInstancesAuthCheckFailed"
USER_DATA_REASON = "UserDataSizeLimitExceeded"
INVALID_USER_DATA = "InvalidUserData"
_MESSAGES = {
    LAUNCH_TEMPLATE_REASON: "Controller isn't authorized to call ec2:CreateLaunchTemplate",
    CREATE_FLEET_REASON: "Controller isn't authorized to call ec2:CreateFleet",
    RUN_INSTANCES_REASON: "Controller isn't authorized to call ec2:RunInstances",
    USER_DATA_REASON: "ec2:CreateLaunchTemplate rejected the rendered user data as too large",
}


@dataclass(slots=True, frozen=True)
class ValidationFailure:
    reason: str
    message: str
    transient: bool = False  # not cached: checked again on the next resolve


class _Failed(Exception):
    def __init__(self, failure: ValidationFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass(slots=True)
class DryRunValidator:
    caller: AwsCaller
    ec2: Any
    launcher: Launcher
    cluster: str
    clock: Callable[[], float] = time.monotonic
    calls: int = 0  # validations that reached AWS (cache misses)
    _cache: dict[str, tuple[float, ValidationFailure | None]] = field(default_factory=dict)

    async def validate(self, resolved: ResolvedNodeClass, types: Sequence[InstanceType]) -> ValidationFailure | None:
        """None when the controller may launch with the class; else why not."""
        key = self._key(resolved)
        cached = self._cache.get(key)
        if cached is not None and cached[0] > self.clock():
            return cached[1]
        chosen = self._instance_type(resolved, types)
        if chosen is None:
            return None  # nothing the class can launch: no launch to authorize (instance types say why)
        self.calls += 1
        try:
            await self._dry_runs(resolved, *chosen)
            result = None
        except _Failed as failed:
            result = failed.failure
        if result is None or not result.transient:
            self._cache = {k: v for k, v in self._cache.items() if not k.startswith(resolved.name + ":")}
            self._cache[key] = (self.clock() + CACHE_SECONDS, result)
        return result

    async def _dry_runs(self, resolved: ResolvedNodeClass, instance_type: InstanceType, image_id: str) -> None:
        tags = owned.launch_tags(self.cluster, "", resolved.name, resolved.user_tags)
        request = LaunchRequest(nodeclaim="", nodepool="", nodeclass=resolved.name,
                                instance_types=[instance_type.name], capacity_types=["on-demand"])
        max_pods = instance_type.capacity.amount("pods") // 1000
        try:
            spec = self.launcher.template_spec(request, resolved, "on-demand", image_id, max_pods, 0, tags)
        except UserDataError as err:  # e.g. spec.userData that is not valid TOML or MIME: no launch can work
            raise _Failed(ValidationFailure(INVALID_USER_DATA, str(err))) from None
        try:
            template = await self.launcher.launch_templates.ensure(spec)
        except Exception as err:
            raise _Failed(_failure(err, LAUNCH_TEMPLATE_REASON)) from None
        overrides = [fleets.Override(instance_type.name, s.zone, s.id, image_id, 0.0) for s in resolved.subnets]
        body = fleets.create_fleet_request(
            "on-demand", {template: overrides}, owned.tag_specifications(["instance", "volume", "fleet"], tags),
            context=resolved.spec.get("context"),
        )
        await self._expect_dry_run(CREATE_FLEET_REASON, self.ec2.create_fleet, DryRun=True, **body)
        first: ValidationFailure | None = None
        for subnet in resolved.subnets:
            try:
                await self._expect_dry_run(
                    RUN_INSTANCES_REASON, self.ec2.run_instances, DryRun=True, MinCount=1, MaxCount=1,
                    InstanceType=instance_type.name,
                    LaunchTemplate={"LaunchTemplateName": template, "Version": "$Latest"},
                    TagSpecifications=owned.tag_specifications(["instance", "volume", "network-interface"], tags),
                    **_subnet_placement(spec.network_interfaces, subnet.id),
                )
                return
            except _Failed as failed:
                first = first or failed.failure
        if first is not None:
            raise _Failed(first)

    async def _expect_dry_run(self, reason: str, call: Any, **params: Any) -> None:
        try:
            await self.caller.call(call, **params)
        except Exception as err:
            if error_code(err) == DRY_RUN_OK:
                return
            raise _Failed(_failure(err, reason)) from None

    @staticmethod
    def _instance_type(resolved: ResolvedNodeClass, types: Sequence[InstanceType]) -> tuple[InstanceType, str] | None:
        """One on-demand-launchable type with its AMI: a fallback type if the class runs one, else the cheapest."""
        launchable = []
        for instance_type in types:
            ami = resolved.amis.for_labels(instance_type.labels) if resolved.amis else None
            prices = [o.price for o in instance_type.offerings if o.available and o.capacity_type == "on-demand"]
            if ami is not None and prices:
                launchable.append((instance_type.name not in FALLBACK_TYPES, min(prices), instance_type.name,
                                   instance_type, ami.id))
        if not launchable:
            return None
        *_, instance_type, image_id = min(launchable, key=lambda row: row[:3])
        return instance_type, image_id

    @staticmethod
    def _key(resolved: ResolvedNodeClass) -> str:
        depends = {
            "spec": resolved.spec,
            "subnets": [s.id for s in resolved.subnets],
            "groups": [g.id for g in resolved.security_groups],
            "amis": [a.id for a in resolved.amis.amis] if resolved.amis else [],
            "profile": resolved.instance_profile,
            "tags": resolved.user_tags,
        }
        digest = hashlib.sha256(json.dumps(depends, sort_keys=True, default=str).encode()).hexdigest()[:16]
        return f"{resolved.name}:{digest}"


def _subnet_placement(interfaces: Sequence[Any] | None, subnet_id: str) -> dict[str, Any]:
    """Where RunInstances puts the instance: the subnet alone, or each of the template's interfaces in it."""
    if not interfaces:
        return {"SubnetId": subnet_id}
    return {"NetworkInterfaces": [
        {k: v for k, v in (("NetworkCardIndex", i.get("NetworkCardIndex")), ("DeviceIndex", i.get("DeviceIndex")),
                           ("InterfaceType", i.get("InterfaceType"))) if v is not None} | {"SubnetId": subnet_id}
        for i in interfaces
    ]}


def _failure(err: Exception, reason: str) -> ValidationFailure:
    code = error_code(err)
    if code in TRANSIENT:
        return ValidationFailure("DryRunRetrying", f"{code}: {err}; the dry run is retried", transient=True)
    if "User data is limited to" in str(err):
        reason = USER_DATA_REASON
    elif code not in AUTH_FAILURES:
        return ValidationFailure("DryRunFailed", f"unexpected answer to the validation dry run: {code}: {err}",
                                 transient=True)
    return ValidationFailure(reason, f"{_MESSAGES[reason]}: {code}: {err}")
