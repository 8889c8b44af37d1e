"""What AWS authorizes for each call the reconciler makes, and a botocore hook that enforces it.

``AuthorizationModel.checks`` turns one API call (service, operation, parameters) into the
authorizations AWS performs for it, each an action on one resource ARN with the request
context's condition keys, following the EC2/IAM/SQS/SSM/EKS service authorization references:

* ``ec2:CreateFleet`` is authorized on the fleet, each launch template (its resource tags),
  the images, subnets and security groups it uses, and each resource it creates (instance,
  volume, network interface, spot request) with that resource's request tags, taken from the
  call's ``TagSpecifications`` or else from the launch template's; tagging on creation is a
  second authorization, ``ec2:CreateTags`` with ``ec2:CreateAction``; an instance profile in
  the template is an ``iam:PassRole`` of its role to ``ec2.amazonaws.com``; an ``instant`` fleet launches
  with the caller's permissions, so all but the fleet is authorized as ``ec2:RunInstances`` too;
* ``ec2:Describe*`` are authorized against ``*`` in the requested region;
* IAM tag-on-create (``CreateInstanceProfile`` with ``Tags``) is also authorized as
  ``iam:TagInstanceProfile`` on the new profile, with the request tags and no resource tags
  (it does not exist yet); ``AddRoleToInstanceProfile`` passes the role (``iam:PassRole``);
* SQS batch calls are authorized as their single-message action; receiving from a queue
  encrypted with a customer KMS key needs ``kms:Decrypt`` on the key.

Resource tags come from the live state of the same endpoint (moto), read with clients of
their own. An operation without a model raises ``UnmodeledOperation``, so a new AWS call in
the reconciler fails the policy tests until someone decides what it needs.

``IamEnforcement.attach(client)`` evaluates every call of that client against the policies
before it is sent: a denied call never reaches moto and raises the error AWS would
(``UnauthorizedOperation`` for EC2, ``AccessDenied*`` elsewhere). Every check is recorded.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import boto3
from support.iam_policy import Decision, PolicyDocument, Request, evaluate

# IAM is a global service answered from us-east-1: aws:RequestedRegion is us-east-1 for it.
GLOBAL_SERVICE_REGION = {"iam": "us-east-1"}
_PARAMS_KEY = "adze.authz.params"
_EC2_CREATED_BY_FLEET = ("instance", "volume", "network-interface")
_EC2_ID_PREFIXES = {
    "i-": "instance",
    "lt-": "launch-template",
    "vol-": "volume",
    "eni-": "network-interface",
    "sg-": "security-group",
    "subnet-": "subnet",
    "fleet-": "fleet",
    "sir-": "spot-instances-request",
}
_DENIED_CODES = {"ec2": "UnauthorizedOperation", "iam": "AccessDenied", "sqs": "AccessDenied"}
# Marks the model's own reads, so fault injection aimed at the reconciler's calls leaves them alone.
OBSERVER_HEADER = "X-Adze-Observer"


class UnmodeledOperation(AssertionError):
    """The reconciler called an operation whose authorization the model does not describe."""


@dataclass(slots=True, frozen=True)
class Check:
    operation: str  # the API call, e.g. ec2:CreateFleet
    action: str  # what is authorized, e.g. ec2:CreateTags
    resource: str
    context: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def request(self) -> Request:
        return Request(self.action, self.resource, self.context)

    def describe(self) -> str:
        keys = ", ".join(f"{k}={'|'.join(v)}" for k, v in sorted(self.context.items()))
        return f"{self.operation}: {self.action} on {self.resource} [{keys}]"


@dataclass(slots=True, frozen=True)
class Denial:
    check: Check
    decision: Decision


def _tag_context(tags: Mapping[str, str], kind: str) -> dict[str, tuple[str, ...]]:
    context = {f"aws:{kind}/{key}": (value,) for key, value in tags.items()}
    if kind == "RequestTag":
        context["aws:TagKeys"] = tuple(sorted(tags))
    return context


def _tags(items: Iterable[Mapping[str, Any]] | None) -> dict[str, str]:
    return {str(t["Key"]): str(t.get("Value", "")) for t in items or []}


def _tags_by_type(specifications: Iterable[Mapping[str, Any]] | None) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for spec in specifications or []:
        found.setdefault(str(spec["ResourceType"]), {}).update(_tags(spec.get("Tags")))
    return found


@dataclass(slots=True, frozen=True)
class LaunchTemplate:
    id: str
    tags: Mapping[str, str]
    data: Mapping[str, Any]


@dataclass(slots=True, frozen=True)
class InstanceProfile:
    arn: str
    tags: Mapping[str, str]
    role_arns: tuple[str, ...]


@functools.lru_cache(maxsize=8)
def _session(region: str, credentials: tuple[tuple[str, str], ...]) -> boto3.session.Session:
    """One session per region and credentials: it caches the loaded service models, so each test's observer
    clients cost milliseconds rather than a re-read of the JSON models (handlers are registered per client)."""
    return boto3.session.Session(region_name=region, **dict(credentials))


@functools.lru_cache(maxsize=8)
def _observer_clients(endpoint_url: str, region: str, credentials: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """The observer's clients, built once per endpoint, region and credentials (a boto3 client costs ~25 ms to
    build, several per test otherwise); they only read and carry no per-test handler."""
    session = _session(region, credentials)
    clients = {service: session.client(service, endpoint_url=endpoint_url) for service in ("ec2", "iam", "sqs", "kms")}
    for client in clients.values():
        client.meta.events.register("before-sign", _mark_observer)
    return clients


class AwsState:
    """Reads resource tags and contents from the endpoint, with clients that are never enforced."""

    def __init__(self, endpoint_url: str, region: str, credentials: Mapping[str, str]) -> None:
        self._clients = _observer_clients(endpoint_url, region, tuple(sorted(credentials.items())))

    def instance_tags(self, instance_id: str) -> dict[str, str] | None:
        ec2 = self._clients["ec2"]
        try:
            reservations = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        except ec2.exceptions.ClientError:
            return None
        instances = [i for r in reservations for i in r["Instances"]]
        return _tags(instances[0].get("Tags")) if instances else None

    def launch_template(self, *, name: str | None = None, template_id: str | None = None) -> LaunchTemplate | None:
        ec2 = self._clients["ec2"]
        selector = {"LaunchTemplateNames": [name]} if name else {"LaunchTemplateIds": [template_id]}
        try:
            found = ec2.describe_launch_templates(**selector)["LaunchTemplates"]
        except ec2.exceptions.ClientError:
            return None
        if not found:
            return None
        template = found[0]
        versions = ec2.describe_launch_template_versions(
            LaunchTemplateId=template["LaunchTemplateId"], Versions=["$Latest"]
        )["LaunchTemplateVersions"]
        data = versions[0].get("LaunchTemplateData", {}) if versions else {}
        return LaunchTemplate(str(template["LaunchTemplateId"]), _tags(template.get("Tags")), data)

    def instance_profile(self, name: str) -> InstanceProfile | None:
        iam = self._clients["iam"]
        try:
            profile = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
        except iam.exceptions.NoSuchEntityException:
            return None
        return InstanceProfile(
            str(profile["Arn"]), _tags(profile.get("Tags")), tuple(str(r["Arn"]) for r in profile.get("Roles") or [])
        )

    def role_arn(self, name: str) -> str | None:
        iam = self._clients["iam"]
        try:
            return str(iam.get_role(RoleName=name)["Role"]["Arn"])
        except iam.exceptions.NoSuchEntityException:
            return None

    def queue_kms_key_arn(self, queue_url: str) -> str | None:
        attributes = self._clients["sqs"].get_queue_attributes(QueueUrl=queue_url, AttributeNames=["KmsMasterKeyId"])
        key = (attributes.get("Attributes") or {}).get("KmsMasterKeyId")
        if not key:
            return None
        return str(self._clients["kms"].describe_key(KeyId=key)["KeyMetadata"]["Arn"])


def _mark_observer(request: Any, **_: Any) -> None:
    request.headers[OBSERVER_HEADER] = "1"


class AuthorizationModel:
    def __init__(self, state: AwsState, account_id: str, partition: str = "aws") -> None:
        self.state = state
        self.account_id = account_id
        self.partition = partition
        self._handlers: dict[str, Callable[[str, Mapping[str, Any], str], list[Check]]] = {
            "ec2:CreateFleet": self._create_fleet,
            "ec2:CreateLaunchTemplate": self._create_launch_template,
            "ec2:RunInstances": self._run_instances,
            "ec2:TerminateInstances": self._terminate_instances,
            "ec2:DeleteLaunchTemplate": self._delete_launch_template,
            "ec2:CreateTags": self._create_tags,
            "iam:GetInstanceProfile": self._profile_action,
            "iam:RemoveRoleFromInstanceProfile": self._profile_action,
            "iam:DeleteInstanceProfile": self._profile_action,
            "iam:CreateInstanceProfile": self._create_instance_profile,
            "iam:AddRoleToInstanceProfile": self._add_role_to_instance_profile,
            "iam:ListInstanceProfiles": self._list_instance_profiles,
            "ssm:GetParameter": self._get_parameter,
            "pricing:GetProducts": lambda op, _, region: [self._check(op, op, "*", region)],
            "sqs:GetQueueUrl": self._get_queue_url,
            "sqs:ReceiveMessage": self._receive_message,
            "sqs:DeleteMessage": self._queue_action("sqs:DeleteMessage"),
            "sqs:DeleteMessageBatch": self._queue_action("sqs:DeleteMessage"),
            "eks:DescribeCluster": self._describe_cluster,
        }

    def checks(self, service: str, operation: str, params: Mapping[str, Any], region: str) -> list[Check]:
        name = f"{service}:{operation}"
        region = GLOBAL_SERVICE_REGION.get(service, region)
        if service == "ec2" and operation.startswith("Describe"):
            return [self._check(name, name, "*", region)]
        handler = self._handlers.get(name)
        if handler is None:
            raise UnmodeledOperation(f"no authorization model for {name}: add one to tests/support/aws_authz.py")
        return handler(name, params, region)

    # --- helpers -------------------------------------------------------------------------------------

    def _check(self, operation: str, action: str, resource: str, region: str,
               **context: Mapping[str, tuple[str, ...]]) -> Check:
        merged: dict[str, tuple[str, ...]] = {"aws:RequestedRegion": (region,)}
        for part in context.values():
            merged.update(part)
        return Check(operation, action, resource, merged)

    def _ec2_arn(self, region: str, kind: str, resource_id: str) -> str:
        account = "" if kind in ("image", "snapshot") else self.account_id  # public images carry no account
        return f"arn:{self.partition}:ec2:{region}:{account}:{kind}/{resource_id}"

    def _ec2_kind(self, resource_id: str) -> str:
        for prefix, kind in _EC2_ID_PREFIXES.items():
            if resource_id.startswith(prefix):
                return kind
        raise UnmodeledOperation(f"EC2 resource id {resource_id!r} has no ARN mapping")

    def _profile_arn(self, name: str, path: str = "/") -> str:
        return f"arn:{self.partition}:iam::{self.account_id}:instance-profile{path}{name}"

    def _queue_arn(self, region: str, url_or_name: str) -> str:
        parts = url_or_name.rstrip("/").split("/")
        account = parts[-2] if len(parts) >= 2 and parts[-2].isdigit() else self.account_id
        return f"arn:{self.partition}:sqs:{region}:{account}:{parts[-1]}"

    # --- EC2 -----------------------------------------------------------------------------------------

    def _create_fleet(self, op: str, params: Mapping[str, Any], region: str) -> list[Check]:
        requested = _tags_by_type(params.get("TagSpecifications"))
        checks = [self._check(op, op, self._ec2_arn(region, "fleet", "fleet-new"), region,
                              tags=_tag_context(requested.get("fleet", {}), "RequestTag"))]
        created_tags = {"fleet": requested.get("fleet", {})}
        images: set[str] = set()
        subnets: set[str] = set()
        groups: set[str] = set()
        profiles: set[str] = set()
        reservations: set[str] = set()
        spot = (params.get("TargetCapacitySpecification") or {}).get("DefaultTargetCapacityType") == "spot"
        created_types = (*_EC2_CREATED_BY_FLEET, "spot-instances-request") if spot else _EC2_CREATED_BY_FLEET
        for config in params.get("LaunchTemplateConfigs") or []:
            spec = config.get("LaunchTemplateSpecification") or {}
            template = self.state.launch_template(name=spec.get("LaunchTemplateName"),
                                                  template_id=spec.get("LaunchTemplateId"))
            if template is None:
                return []  # EC2 answers "launch template not found" before anything is launched
            checks.append(self._check(op, op, self._ec2_arn(region, "launch-template", template.id), region,
                                      tags=_tag_context(template.tags, "ResourceTag")))
            data = template.data
            in_template = _tags_by_type(data.get("TagSpecifications"))
            for kind in created_types:
                tags = requested.get(kind) or in_template.get(kind) or {}
                created_tags[kind] = tags
            if data.get("ImageId"):
                images.add(str(data["ImageId"]))
            groups.update(str(g) for g in data.get("SecurityGroupIds") or [])
            # A launch into a capacity reservation also "uses" the reservation (capacity-reservation/* ARN).
            target = (data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
            if target.get("CapacityReservationId"):
                reservations.add(str(target["CapacityReservationId"]))
            for interface in data.get("NetworkInterfaces") or []:
                groups.update(str(g) for g in interface.get("Groups") or [])
            profile = data.get("IamInstanceProfile") or {}
            if profile.get("Name") or profile.get("Arn"):
                profiles.add(str(profile.get("Name") or str(profile["Arn"]).rsplit("/", 1)[-1]))
            for override in config.get("Overrides") or []:
                if override.get("ImageId"):
                    images.add(str(override["ImageId"]))
                if override.get("SubnetId"):
                    subnets.add(str(override["SubnetId"]))
        for kind, ids in (("image", images), ("subnet", subnets), ("security-group", groups),
                          ("capacity-reservation", reservations)):
            checks += [self._check(op, op, self._ec2_arn(region, kind, i), region) for i in sorted(ids)]
        for kind in created_types:
            tags = created_tags.get(kind, {})
            arn = self._ec2_arn(region, kind, "new")
            checks.append(self._check(op, op, arn, region, tags=_tag_context(tags, "RequestTag")))
        # An instant fleet launches with the caller's own permissions (no service-linked role): everything it
        # uses or creates besides the fleet itself is also authorized as ec2:RunInstances.
        checks += [Check(op, "ec2:RunInstances", c.resource, c.context) for c in checks
                   if c.action == op and ":fleet/" not in c.resource]
        for kind, tags in sorted(created_tags.items()):
            if tags:
                checks.append(self._check(op, "ec2:CreateTags", self._ec2_arn(region, kind, "new"), region,
                                          tags=_tag_context(tags, "RequestTag"),
                                          creating={"ec2:CreateAction": ("CreateFleet",)}))
        for name in sorted(profiles):
            found = self.state.instance_profile(name)
            for role in found.role_arns if found else ():
                checks.append(self._check(op, "iam:PassRole", role, region,
                                          passed={"iam:PassedToService": ("ec2.amazonaws.com",)}))
        return checks

    def _run_instances(self, op: str, params: Mapping[str, Any], region: str) -> list[Check]:
        """RunInstances from a launch template (the validation dry run): the template (its resource tags),
        image, subnets and groups it uses, each resource it creates with its request tags, tagging on
        creation and the instance profile's PassRole (a dry run is authorized exactly like the real call)."""
        spec = params.get("LaunchTemplate") or {}
        template = self.state.launch_template(name=spec.get("LaunchTemplateName"),
                                              template_id=spec.get("LaunchTemplateId"))
        if template is None:
            return []  # EC2 answers "launch template not found" before authorizing anything
        data = template.data
        checks = [self._check(op, op, self._ec2_arn(region, "launch-template", template.id), region,
                              tags=_tag_context(template.tags, "ResourceTag"))]
        interfaces = [*(params.get("NetworkInterfaces") or []), *(data.get("NetworkInterfaces") or [])]
        subnets = {str(s) for s in [params.get("SubnetId"), *(i.get("SubnetId") for i in interfaces)] if s}
        groups = {str(g) for g in [*(data.get("SecurityGroupIds") or []),
                                   *(g for i in interfaces for g in i.get("Groups") or [])]}
        images = {str(data["ImageId"])} if data.get("ImageId") else set()
        for kind, ids in (("image", images), ("subnet", subnets), ("security-group", groups)):
            checks += [self._check(op, op, self._ec2_arn(region, kind, i), region) for i in sorted(ids)]
        requested = _tags_by_type(params.get("TagSpecifications"))
        in_template = _tags_by_type(data.get("TagSpecifications"))
        for kind in _EC2_CREATED_BY_FLEET:
            tags = requested.get(kind) or in_template.get(kind) or {}
            arn = self._ec2_arn(region, kind, "new")
            checks.append(self._check(op, op, arn, region, tags=_tag_context(tags, "RequestTag")))
            if tags:
                checks.append(self._check(op, "ec2:CreateTags", arn, region, tags=_tag_context(tags, "RequestTag"),
                                          creating={"ec2:CreateAction": ("RunInstances",)}))
        profile = data.get("IamInstanceProfile") or {}
        name = profile.get("Name") or str(profile.get("Arn") or "").rsplit("/", 1)[-1]
        found = self.state.instance_profile(str(name)) if name else None
        for role in found.role_arns if found else ():
            checks.append(self._check(op, "iam:PassRole", role, region,
                                      passed={"iam:PassedToService": ("ec2.amazonaws.com",)}))
        return checks

    def _create_launch_template(self, op: str, params: Mapping[str, Any], region: str) -> list[Check]:
        tags = _tags_by_type(params.get("TagSpecifications")).get("launch-template", {})
        arn = self._ec2_arn(region, "launch-template", "lt-new")
        checks = [self._check(op, op, arn, region, tags=_tag_context(tags, "RequestTag"))]
        if tags:
            checks.append(self._check(op, "ec2:CreateTags", arn, region, tags=_tag_context(tags, "RequestTag"),
                                      creating={"ec2:CreateAction": ("CreateLaunchTemplate",)}))
        return checks

    def _terminate_instances(self, op: str, params: Mapping[str, Any], region: str) -> list[Check]:
        checks = []
        for instance_id in params.get("InstanceIds") or []:
            tags = self.state.instance_tags(str(instance_id))
            if tags is None:
                continue  # EC2 answers InvalidInstanceID.NotFound
            checks.append(self._check(op, op, self._ec2_arn(region, "instance", str(instance_id)), region,
                                      tags=_tag_context(tags, "ResourceTag")))
        return checks

    def _delete_launch_template(self, op: str, params: Mapping[str, Any], region: str) -> list[Check]:
        template = self.state.launch_template(name=params.get("LaunchTemplateName"),
                                              template_id=params.get("LaunchTemplateId"))
        if template is None:
            return []
        return [self._check(op, op, self._ec2_arn(region, "launch-template", template.id), region,
                            tags=_tag_context(template.tags, "ResourceTag"))]

    def _create_tags(self, op: str, params: Mapping[str, Any], region: str) -> list[Check]:
        requested = _tag_context(_tags(params.get("Tags")), "RequestTag")
        checks = []
        for resource_id in params.get("Resources") or []:
            kind = self._ec2_kind(str(resource_id))
            existing = self.state.instance_tags(str(resource_id)) if kind == "instance" else {}
            checks.append(self._check(op, op, self._ec2_arn(region, kind, str(resource_id)), region,
                                      tags=requested, resource_tags=_tag_context(existing or {}, "ResourceTag")))
        return checks

    # --- IAM -----------------------------------------------------------------------------------------

    def _existing_profile(self, name: str) -> tuple[str, dict[str, tuple[str, ...]]]:
        found = self.state.instance_profile(name)
        if found is None:
            return self._profile_arn(name), {}
        return found.arn, _tag_context(found.tags, "ResourceTag")

    def _profile_action(self, op: str, params: Mapping[str, Any], region: str) -> list[Check]:
        arn, tags = self._existing_profile(str(params["InstanceProfileName"]))
        return [self._check(op, op, arn, region, tags=tags)]

    def _create_instance_profile(self, op: str, params: Mapping[str, Any], region: str) -> list[Check]:
        tags = _tags(params.get("Tags"))
        arn = self._profile_arn(str(params["InstanceProfileName"]), str(params.get("Path") or "/"))
        checks = [self._check(op, op, arn, region, tags=_tag_context(tags, "RequestTag"))]
        if tags:
            checks.append(self._check(op, "iam:TagInstanceProfile", arn, region,
                                      tags=_tag_context(tags, "RequestTag")))
        return checks

    def _add_role_to_instance_profile(self, op: str, params: Mapping[str, Any], region: str) -> list[Check]:
        checks = self._profile_action(op, params, region)
        role = str(params["RoleName"])
        role_arn = self.state.role_arn(role) or f"arn:{self.partition}:iam::{self.account_id}:role/{role}"
        checks.append(self._check(op, "iam:PassRole", role_arn, region,
                                  passed={"iam:PassedToService": ("ec2.amazonaws.com",)}))
        return checks

    def _list_instance_profiles(self, op: str, params: Mapping[str, Any], region: str) -> list[Check]:
        prefix = str(params.get("PathPrefix") or "/")
        return [self._check(op, op, f"arn:{self.partition}:iam::{self.account_id}:instance-profile{prefix}", region)]

    # --- SSM, SQS, EKS -------------------------------------------------------------------------------

    def _get_parameter(self, op: str, params: Mapping[str, Any], region: str) -> list[Check]:
        name = str(params["Name"])
        if name.startswith("arn:"):
            return [self._check(op, op, name, region)]
        public = name.startswith("/aws/service/")  # AWS's public parameters have no account in their ARN
        arn = f"arn:{self.partition}:ssm:{region}:{'' if public else self.account_id}:parameter/{name.lstrip('/')}"
        return [self._check(op, op, arn, region)]

    def _get_queue_url(self, op: str, params: Mapping[str, Any], region: str) -> list[Check]:
        owner = str(params.get("QueueOwnerAWSAccountId") or self.account_id)
        arn = f"arn:{self.partition}:sqs:{region}:{owner}:{params['QueueName']}"
        return [self._check(op, op, arn, region)]

    def _receive_message(self, op: str, params: Mapping[str, Any], region: str) -> list[Check]:
        url = str(params["QueueUrl"])
        checks = [self._check(op, op, self._queue_arn(region, url), region)]
        key = self.state.queue_kms_key_arn(url)
        if key:
            checks.append(self._check(op, "kms:Decrypt", key, region,
                                      via={"kms:ViaService": (f"sqs.{region}.amazonaws.com",)}))
        return checks

    def _queue_action(self, action: str) -> Callable[[str, Mapping[str, Any], str], list[Check]]:
        def checks(op: str, params: Mapping[str, Any], region: str) -> list[Check]:
            return [self._check(op, action, self._queue_arn(region, str(params["QueueUrl"])), region)]

        return checks

    def _describe_cluster(self, op: str, params: Mapping[str, Any], region: str) -> list[Check]:
        arn = f"arn:{self.partition}:eks:{region}:{self.account_id}:cluster/{params['name']}"
        return [self._check(op, op, arn, region)]


class IamEnforcement:
    """Evaluates every call of the attached clients against ``policies`` before it is sent."""

    def __init__(self, policies: Sequence[PolicyDocument], model: AuthorizationModel, *, enforce: bool = True,
                 principal: str = "arn:aws:sts::123456789012:assumed-role/adze-controller/reconciler") -> None:
        self.policies = list(policies)
        self.model = model
        self.enforce = enforce
        self.principal = principal
        self.checks: list[Check] = []
        self.denials: list[Denial] = []
        self.operations: set[str] = set()
        self._lock = threading.Lock()

    def attach(self, client: Any) -> Any:
        client.meta.events.register("before-parameter-build", self._remember_params, unique_id="adze-authz-params")
        client.meta.events.register("before-call", self._authorize, unique_id="adze-authz-call")
        return client

    def _remember_params(self, params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        context[_PARAMS_KEY] = copy.deepcopy(dict(params))

    def _authorize(self, model: Any, context: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]] | None:
        service = model.service_model.signing_name
        params = context.get(_PARAMS_KEY, {})
        checks = self.model.checks(service, model.name, params, str(context.get("client_region") or ""))
        denied = []
        for check in checks:
            decision = evaluate(self.policies, check.request())
            if not decision.allowed:
                denied.append(Denial(check, decision))
        with self._lock:
            self.operations.add(f"{service}:{model.name}")
            self.checks.extend(checks)
            self.denials.extend(denied)
        if not denied or not self.enforce:
            return None
        first = denied[0].check
        reason = ("an explicit deny in an identity-based policy denies" if denied[0].decision.outcome == "explicit-deny"
                  else "no identity-based policy allows")
        message = (f"User: {self.principal} is not authorized to perform: {first.action} on resource: "
                   f"{first.resource} because {reason} the {first.action} action")
        code = _DENIED_CODES.get(service, "AccessDeniedException")
        response = SimpleNamespace(status_code=403, headers={}, content=b"", text="")
        return response, {"Error": {"Code": code, "Message": message},
                          "ResponseMetadata": {"HTTPStatusCode": 403, "HTTPHeaders": {}, "RetryAttempts": 0}}

    def denied_report(self) -> str:
        with self._lock:
            return "\n".join(f"  {d.check.describe()} -> {d.decision.outcome}" for d in self.denials)
