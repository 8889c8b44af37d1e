"""The stack configuration: a typed model of every ``adze:*`` key, validated before any resource exists.

Each top-level field is one Pulumi config key (``adze:network``, ``adze:nodePools`` ...).
Errors name the config path, e.g. ``adze:nodePools[1].disruption.budgets[0].schedule``,
so ``pulumi preview`` fails with a line the user can act on instead of a traceback.
NodeClasses and NodePools are checked by the reconciler's own Karpenter API models
(see ``components.karpenter_config``), so the stack accepts exactly what the cluster will.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from components.karpenter_config import NodeClassEntry, NodePoolEntry, validate_karpenter_entries
from reconciler.api.errors import ERROR_TYPE, Problem, problems_from_validation_error
from reconciler.model.meta import ManifestError
from reconciler.model.quantity import QuantityError, parse_quantity
from reconciler.model.shape import check_document_bounds
from reconciler.settings import Settings, SettingsError

NAMESPACE = "adze"

# Env vars the reconciler component derives from the stack; users cannot override them.
RESERVED_SETTINGS = frozenset(
    {
        "CLUSTER_NAME",
        "CLUSTER_ENDPOINT",
        "INTERRUPTION_QUEUE",
        "AWS_REGION",
        "METRICS_PORT",
        "HEALTH_PROBE_PORT",
        "LOG_LEVEL",
        "SYSTEM_NAMESPACE",
        "LEADER_ELECTION_NAME",
        "LEADER_ELECTION_NAMESPACE",
    }
)
# Karpenter setting names a user may pass through ``adze:reconciler.settings``.
ALLOWED_SETTINGS = frozenset(
    {
        "BATCH_IDLE_DURATION",
        "BATCH_MAX_DURATION",
        "FEATURE_GATES",
        "PREFERENCE_POLICY",
        "MIN_VALUES_POLICY",
        "ISOLATED_VPC",
        "VM_MEMORY_OVERHEAD_PERCENT",
        "RESERVED_ENIS",
        "DISABLE_DRY_RUN",
        "DISABLE_LEADER_ELECTION",
        "KUBE_CLIENT_QPS",
        "KUBE_CLIENT_BURST",
        "REBALANCE_HANDLING",
    }
)


class ConfigError(ValueError):
    """Bad stack configuration; ``str()`` is one ``adze:<path>: <problem>`` line per problem."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("invalid stack configuration:\n" + "\n".join(f"  {p}" for p in self.problems))


def _problem(message: str) -> PydanticCustomError:
    return PydanticCustomError(ERROR_TYPE, "{message}", {"message": message, "subpath": ""})


def _field_problem(message: str, subpath: str) -> PydanticCustomError:
    return PydanticCustomError(ERROR_TYPE, "{message}", {"message": message, "subpath": subpath})


def _checked(check: Any) -> AfterValidator:
    def run(value: Any) -> Any:
        problem = check(value)
        if problem:
            raise _problem(problem)
        return value

    return AfterValidator(run)


def _cidr_problem(value: str) -> str | None:
    try:
        ipaddress.IPv4Network(value)
    except ValueError:
        return f"{value!r} is not an IPv4 CIDR block such as 10.0.0.0/16"
    return None


def _pattern(regex: str, what: str) -> AfterValidator:
    compiled = re.compile(regex)
    return _checked(lambda value: None if compiled.fullmatch(value) else f"{value!r} is not {what}")


Cidr = Annotated[str, _checked(_cidr_problem)]
DnsLabel = Annotated[
    str,
    _pattern(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "a DNS-1123 label (lower-case alphanumerics and '-')"),
]
RoleArn = Annotated[str, _pattern(r"arn:aws(-[a-z]+)*:iam::\d{12}:role/[\w+=,.@/-]+", "an IAM role ARN")]
KmsKeyArn = Annotated[str, _pattern(r"arn:aws(-[a-z]+)*:kms:[a-z0-9-]+:\d{12}:(key|alias)/[\w/-]+", "a KMS key ARN")]
InstanceType = Annotated[str, _pattern(r"[a-z][a-z0-9-]*\.[a-z0-9]+", "an EC2 instance type such as m6i.large")]
ClusterName = Annotated[
    str,
    Field(min_length=1, max_length=100),
    _pattern(r"[0-9A-Za-z][A-Za-z0-9_-]*", "a valid EKS cluster name (letters, digits, '-' and '_')"),
]


class ConfigModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class NetworkConfig(ConfigModel):
    """``create`` builds a VPC; ``existing`` tags the given subnets for discovery."""

    mode: Literal["create", "existing"] = "create"
    cidr: Cidr = "10.0.0.0/16"
    availability_zones: Annotated[int, Field(ge=2, le=6)] = 3
    nat_gateways: Literal["single", "one-per-az"] = "one-per-az"
    vpc_id: Annotated[str, _pattern(r"vpc-[0-9a-f]{8,17}", "a VPC id (vpc-...)")] | None = None
    private_subnet_ids: list[Annotated[str, _pattern(r"subnet-[0-9a-f]{8,17}", "a subnet id (subnet-...)")]] = []
    public_subnet_ids: list[Annotated[str, _pattern(r"subnet-[0-9a-f]{8,17}", "a subnet id (subnet-...)")]] = []
    tag_elb_roles: bool = False
    # Off when the subnets already carry another cluster's discovery tag (one value per key):
    # then every NodeClass must select subnets itself.
    tag_discovery: bool = True

    @model_validator(mode="after")
    def _mode_fields(self) -> NetworkConfig:
        given = self.model_fields_set
        if self.mode == "existing":
            if not self.vpc_id:
                raise _field_problem("required when mode is existing", "vpcId")
            if len(self.private_subnet_ids) < 2:
                raise _field_problem("needs at least two subnets in different zones (EKS)", "privateSubnetIds")
            for key in ("cidr", "availability_zones", "nat_gateways"):
                if key in given:
                    raise _field_problem("only valid with mode: create", to_camel(key))
        else:
            for key in ("vpc_id", "private_subnet_ids", "public_subnet_ids", "tag_elb_roles", "tag_discovery"):
                if key in given:
                    raise _field_problem("only valid with mode: existing", to_camel(key))
            prefix = ipaddress.IPv4Network(self.cidr).prefixlen
            if prefix > 20:
                raise _field_problem(f"/{prefix} is too small for node subnets; use /20 or larger", "cidr")
        return self


class SystemNodeGroupConfig(ConfigModel):
    """The managed node group that hosts the reconciler and cluster add-ons (never managed by Adze)."""

    instance_types: Annotated[list[InstanceType], Field(min_length=1)] = ["m6i.large"]
    capacity_type: Literal["ON_DEMAND", "SPOT"] = "ON_DEMAND"
    ami_type: Literal[
        "AL2023_x86_64_STANDARD", "AL2023_ARM_64_STANDARD", "BOTTLEROCKET_x86_64", "BOTTLEROCKET_ARM_64"
    ] = "AL2023_x86_64_STANDARD"
    min_size: Annotated[int, Field(ge=1)] = 2
    desired_size: Annotated[int, Field(ge=1)] | None = None
    max_size: Annotated[int, Field(ge=1)] = 3
    disk_size_gib: Annotated[int, Field(ge=20, le=1000)] = 50
    taint: bool = True

    @model_validator(mode="after")
    def _sizes(self) -> SystemNodeGroupConfig:
        desired = self.desired_size if self.desired_size is not None else self.min_size
        if not self.min_size <= desired <= self.max_size:
            field = "desiredSize" if self.desired_size is not None else "minSize"
            raise _field_problem(f"must satisfy minSize <= desiredSize <= maxSize ({self.max_size})", field)
        return self

    @property
    def arm64(self) -> bool:
        return "ARM_64" in self.ami_type


class InterruptionConfig(ConfigModel):
    """The SQS queue fed by EventBridge; ``encryption: kms`` without a key ARN creates a key."""

    enabled: bool = True
    encryption: Literal["sqs-managed", "kms"] = "sqs-managed"
    kms_key_arn: KmsKeyArn | None = None
    rebalance_rule: bool = True

    @model_validator(mode="after")
    def _key(self) -> InterruptionConfig:
        if self.kms_key_arn and self.encryption != "kms":
            raise _field_problem("only valid with encryption: kms", "kmsKeyArn")
        return self


def _quantities_problem(values: dict[str, str]) -> str | None:
    for resource, quantity in values.items():
        if resource not in ("cpu", "memory", "ephemeral-storage"):
            return f"unknown resource {resource!r} (cpu, memory or ephemeral-storage)"
        try:
            parse_quantity(quantity)
        except (QuantityError, ValueError, TypeError):
            return f"{resource}: {quantity!r} is not a Kubernetes quantity"
    return None


ResourceList = Annotated[dict[str, str | int], _checked(_quantities_problem)]


class ContainerResources(ConfigModel):
    requests: ResourceList = {"cpu": "500m", "memory": "512Mi"}
    limits: ResourceList = {"memory": "1Gi"}

    @model_validator(mode="after")
    def _limits_cover_requests(self) -> ContainerResources:
        for resource, limit in self.limits.items():
            request = self.requests.get(resource)
            if request is not None and parse_quantity(request) > parse_quantity(limit):
                raise _field_problem(f"request {request} exceeds limit {limit}", f"requests[{resource}]")
        return self


class ReconcilerConfig(ConfigModel):
    image: Annotated[str, Field(min_length=1)] | None = None
    replicas: Annotated[int, Field(ge=1, le=5)] = 2
    namespace: DnsLabel = "adze"
    resources: ContainerResources = ContainerResources()
    log_level: Literal["debug", "info", "warn", "error"] = "info"
    settings: dict[str, str] = {}

    @model_validator(mode="after")
    def _settings(self) -> ReconcilerConfig:
        for key in self.settings:
            if key in RESERVED_SETTINGS:
                raise _field_problem("set by the stack; remove it", f"settings[{key}]")
            if key not in ALLOWED_SETTINGS:
                raise _field_problem(
                    f"unknown setting (known: {', '.join(sorted(ALLOWED_SETTINGS))})", f"settings[{key}]"
                )
        try:
            Settings.from_env(self.settings)
        except SettingsError as err:
            variable, _, message = str(err).partition(": ")
            if message and re.fullmatch(r"[A-Z_]+", variable):
                raise _field_problem(message, f"settings[{variable}]") from None
            raise _field_problem(str(err), "settings") from None
        return self


class StackConfig(ConfigModel):
    cluster_name: ClusterName
    kubernetes_version: Annotated[str, _pattern(r"1\.\d{2}", "a Kubernetes minor version such as 1.33")] = "1.33"
    endpoint_public_access: bool = True
    public_access_cidrs: list[Cidr] = ["0.0.0.0/0"]
    cluster_log_types: list[Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]] = [
        "api",
        "audit",
        "authenticator",
    ]
    identity_mode: Literal["pod-identity", "irsa"] = "pod-identity"
    deployer_role_arn: RoleArn | None = None
    # Read-only identity of pull-request previews: an access entry with a view-only access policy.
    preview_role_arn: RoleArn | None = None
    protect: bool = False
    create_spot_service_linked_role: bool = False
    metrics_server: bool = True
    network: NetworkConfig = NetworkConfig()
    system_node_group: SystemNodeGroupConfig = SystemNodeGroupConfig()
    interruption: InterruptionConfig = InterruptionConfig()
    reconciler: ReconcilerConfig = ReconcilerConfig()
    node_classes: tuple[NodeClassEntry, ...] = ()
    node_pools: tuple[NodePoolEntry, ...] = ()

    @model_validator(mode="after")
    def _cross_checks(self) -> StackConfig:
        # Required anti-affinity puts each replica on its own system node.
        if self.reconciler.replicas > self.system_node_group.max_size:
            raise _field_problem(
                f"{self.reconciler.replicas} replicas need as many system nodes; "
                f"systemNodeGroup.maxSize is {self.system_node_group.max_size}",
                "reconciler.replicas",
            )
        if self.preview_role_arn and self.preview_role_arn == self.deployer_role_arn:
            raise _field_problem("must differ from deployerRoleArn (one access entry per principal)",
                                 "previewRoleArn")
        if self.public_access_cidrs != ["0.0.0.0/0"] and not self.endpoint_public_access:
            raise _field_problem("only valid with endpointPublicAccess: true", "publicAccessCidrs")
        return self


# Keys whose values are objects or lists; Pulumi hands them over as JSON text.
_STRUCTURED_KEYS = frozenset(
    {
        "network",
        "systemNodeGroup",
        "interruption",
        "reconciler",
        "nodeClasses",
        "nodePools",
        "publicAccessCidrs",
        "clusterLogTypes",
    }
)
KNOWN_KEYS = frozenset(field.alias or name for name, field in StackConfig.model_fields.items())


def load_stack_config(raw: Mapping[str, Any]) -> StackConfig:
    """Validate the config keys (``adze:`` prefix stripped); ``ConfigError`` names each bad path."""
    prefix = f"{NAMESPACE}:"
    problems = [Problem(f"{prefix}{key}", "unknown config key") for key in raw if key not in KNOWN_KEYS]
    for key, value in raw.items():
        try:
            check_document_bounds(value, path=f"{prefix}{key}")
        except ManifestError as err:
            path, _, message = str(err).partition(": ")
            raise ConfigError([*problems, Problem(path, message)]) from None
    config: StackConfig | None = None
    try:
        config = StackConfig.model_validate(
            {k: v for k, v in raw.items() if k in KNOWN_KEYS and k not in ("nodeClasses", "nodePools")}
        )
    except ValidationError as err:
        problems += [Problem(prefix + p.path, p.message) for p in problems_from_validation_error(err)]
    cluster_name = config.cluster_name if config else str(raw.get("clusterName") or "cluster")
    karpenter_problems, node_classes, node_pools = validate_karpenter_entries(
        raw.get("nodeClasses", []), raw.get("nodePools", []), cluster_name=cluster_name, prefix=prefix
    )
    problems += karpenter_problems
    if config and not config.network.tag_discovery:
        for index, entry in enumerate(raw.get("nodeClasses") or []):
            if isinstance(entry, Mapping) and "subnetSelectorTerms" not in entry:
                problems.append(
                    Problem(
                        f"{prefix}nodeClasses[{index}].subnetSelectorTerms",
                        "required when adze:network.tagDiscovery is false (the subnets carry no discovery tag)",
                    )
                )
    if config and config.metrics_server and config.system_node_group.taint and not raw.get("nodePools"):
        problems.append(
            Problem(
                f"{prefix}metricsServer",
                "metrics-server needs a NodePool to run on (system nodes are tainted): "
                "declare one in adze:nodePools or set metricsServer: false",
            )
        )
    if problems or config is None:
        raise ConfigError(problems)
    return config.model_copy(update={"node_classes": node_classes, "node_pools": node_pools})


def parse_raw_value(key: str, value: Any) -> Any:
    """Pulumi passes structured values as JSON text and scalars as strings; decode the former."""
    if key in _STRUCTURED_KEYS and isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as err:
            raise ConfigError([Problem(f"{NAMESPACE}:{key}", f"is not valid JSON/YAML structure ({err})")]) from None
    return value


def read_pulumi_config() -> StackConfig:
    """Read every ``adze:*`` key of the running stack (including unknown ones, to report typos)."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    prefix = f"{NAMESPACE}:"
    # Real runs pass config in PULUMI_CONFIG; unit tests set it in-process (set_all_config).
    names = set(runtime_config.get_config_env()) | set(runtime_config.CONFIG.get())
    keys = {name[len(prefix) :] for name in names if name.startswith(prefix)} | KNOWN_KEYS
    stack_config = pulumi.Config(NAMESPACE)
    raw: dict[str, Any] = {}
    for key in sorted(keys):
        value = stack_config.get(key)
        # Pulumi.yaml declares optional strings with an empty default.
        if value is not None and value != "":
            raw[key] = parse_raw_value(key, value)
    return load_stack_config(raw)


__all__ = [
    "NAMESPACE",
    "ConfigError",
    "InterruptionConfig",
    "NetworkConfig",
    "ReconcilerConfig",
    "StackConfig",
    "SystemNodeGroupConfig",
    "load_stack_config",
    "parse_raw_value",
    "read_pulumi_config",
]
