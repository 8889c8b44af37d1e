"""moto harness for the AWS provider tests: fault plan, recorders, crash injection, provider factory.

Faults are injected inside moto (ThreadedMotoServer runs in this process):

- ``FaultPlan.ice``: CreateFleet drops these (capacity type, type, zone)
  overrides and answers AWS-shaped ``Errors[]`` (moto never returns any;
  the CreateFleet patch lives in ``reconciler.cloud.aws.moto_patches``);
- ``FaultPlan.fleet_errors``: extra per-override error codes (subnet exhaustion,
  spot service-linked role...);
- ``FaultPlan.throttle``: a fraction of EC2 calls answer ``RequestLimitExceeded``
  before moto touches its state, so a retried call never launches twice;
- ``FaultPlan.whole_call_errors``: an action fails outright with a code (``dry_run_errors``: its
  ``DryRun=True`` calls, the NodeClass validation's).

``Recorder`` captures the parameters of every boto3 call our code makes
(botocore ``before-parameter-build`` hook); ``CrashAfter`` raises a
``SimulatedCrash`` (a BaseException, so no ``except Exception`` swallows it)
right after the N-th AWS call has taken effect.
"""

from __future__ import annotations

import copy
import random
import threading
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.retries.standard import ExponentialBackoff
from moto.core.responses import ActionResult, BaseResponse
from moto.ec2.exceptions import EC2ClientError
from support.aws_authz import OBSERVER_HEADER

from reconciler.cloud.aws.clients import AwsClients
from reconciler.cloud.aws.moto_patches import install_fleet_patch, set_fleet_faults
from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.provider import AWSCloudProvider, AWSProviderConfig

CLUSTER = "test-cluster"
# Narrow discovery keeps DescribeInstanceTypes fast; one test covers the full, unfiltered call.
TEST_FAMILIES = ("m5.*", "c5.*", "c6g.*", "t3.*", "r5.*", "g5.*", "m6i.*")


@dataclass
class FaultPlan:
    ice: set[tuple[str, str, str]] = field(default_factory=set)
    fleet_errors: dict[tuple[str, str, str], str] = field(default_factory=dict)
    throttle: float = 0.0
    throttle_actions: frozenset[str] | None = None  # None = every EC2 action
    whole_call_errors: dict[str, str] = field(default_factory=dict)  # real calls (not dry runs)
    dry_run_errors: dict[str, str] = field(default_factory=dict)  # DryRun=True calls (validation)
    seed: int = 7
    throttled: int = 0
    fleet_calls: int = 0
    _random: random.Random = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def fleet_error(self, capacity_type: str, instance_type: str, zone: str) -> str | None:
        key = (capacity_type, instance_type, zone)
        return self.fleet_errors.get(key) or ("InsufficientInstanceCapacity" if key in self.ice else None)

    def on_fleet_call(self) -> None:
        with self._lock:
            self.fleet_calls += 1

    def should_throttle(self, action: str) -> bool:
        if not self.throttle or (self.throttle_actions is not None and action not in self.throttle_actions):
            return False
        with self._lock:
            hit = self._random.random() < self.throttle
            self.throttled += hit
        return hit


class _Active:
    _plan: FaultPlan | None = None

    @property
    def plan(self) -> FaultPlan | None:
        return self._plan

    @plan.setter
    def plan(self, plan: FaultPlan | None) -> None:
        self._plan = plan
        set_fleet_faults(plan)


ACTIVE = _Active()


# Tests compress botocore's retry back-off (0.5 s, 1 s, 2 s... for throttling) by this factor:
# the retry decisions are botocore's own, only the waiting is shortened.
BACKOFF_SCALE = 0.02


def install_patches() -> None:
    if getattr(BaseResponse, "_adze_faults", False):
        return
    original_delay = ExponentialBackoff.delay_amount

    def compressed_delay(self: ExponentialBackoff, context: Any) -> float:
        return original_delay(self, context) * BACKOFF_SCALE

    ExponentialBackoff.delay_amount = compressed_delay  # type: ignore[method-assign]
    original_call_action = BaseResponse.call_action

    def call_action(self: BaseResponse) -> Any:
        plan = ACTIVE.plan
        if plan is not None and self.service_name == "ec2" and not self.headers.get(OBSERVER_HEADER):
            action = self._get_action()
            dry_run = str(self._get_param("DryRun", False)).lower() == "true"
            code = (plan.dry_run_errors if dry_run else plan.whole_call_errors).get(action)
            if code is None and plan.should_throttle(action):
                code = "RequestLimitExceeded"
            if code is not None:
                status, headers, body = self.serialized(
                    ActionResult(EC2ClientError(code, f"injected {code}"))
                )
                return status, headers, body
        return original_call_action(self)

    BaseResponse.call_action = call_action  # type: ignore[method-assign]
    install_fleet_patch(faithful_security_groups=False)
    BaseResponse._adze_faults = True  # type: ignore[attr-defined]


# One botocore session for every test provider: its loaded service models are cached, so a
# "restarted process" in the crash matrix costs milliseconds instead of re-reading JSON models.
_SESSION = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing")


def make_provider(aws: OfflineAWS, **overrides: Any) -> AWSCloudProvider:
    options: dict[str, Any] = {
        "cluster": aws.cluster_info(),
        "region": aws.region,
        "endpoint_url": aws.endpoint_url,
        "instance_type_filters": ({"Name": "instance-type", "Values": list(TEST_FAMILIES)},),
        "access_key_id": "testing",
        "secret_access_key": "testing",
        "retry_mode": "standard",
        "max_attempts": 10,
    }
    options.update(overrides)
    config = AWSProviderConfig(**options)
    provider = AWSCloudProvider(config, clients=AwsClients(config.client_options(), session=_SESSION))
    provider.pricing.set_spot_prices(aws.spot_prices())
    return provider


class Recorder:
    """Every AWS call our code makes: (service, operation, deep-copied parameters)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def attach(
        self, provider: AWSCloudProvider, services: tuple[str, ...] = ("ec2", "ssm", "iam")
    ) -> Recorder:
        for service in services:
            provider.clients.client(service).meta.events.register("before-parameter-build", self._record)
        return self

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        with self._lock:
            self.calls.append((model.service_model.service_name, model.name, copy.deepcopy(params)))

    def of(self, operation: str, *, dry_run: bool = False) -> list[dict[str, Any]]:
        """The calls of ``operation``: real ones, or (``dry_run``) the NodeClass validation's dry runs."""
        return [params for _, name, params in self.calls
                if name == operation and bool(params.get("DryRun")) == dry_run]

    def fleet_template(self) -> dict[str, Any]:
        """The CreateLaunchTemplate call of the template the (one) real CreateFleet launched from; the
        validation's dry runs create a template of their own first (``validation.py``)."""
        (fleet,) = self.of("CreateFleet")
        name = fleet["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
        (template,) = [call for call in self.of("CreateLaunchTemplate") if call["LaunchTemplateName"] == name]
        return template


class SimulatedCrash(BaseException):
    """The reconciler process dies here."""


class CrashAfter:
    """Raise ``SimulatedCrash`` right after the N-th successful AWS call (1-based)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.count = 0
        self.crashed_after: str | None = None
        self._lock = threading.Lock()

    def attach(
        self, provider: AWSCloudProvider, services: tuple[str, ...] = ("ec2", "ssm", "iam")
    ) -> CrashAfter:
        for service in services:
            provider.clients.client(service).meta.events.register("after-call", self._after)
        return self

    def _after(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.count += 1
            if self.count == self.n:
                self.crashed_after = model.name
                raise SimulatedCrash(model.name)
