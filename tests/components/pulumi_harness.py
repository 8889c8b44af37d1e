"""Run the whole Pulumi program under unit-test mocks and record every registration.

Two SDK problems are handled here (see shared/reference/pulumi.md §1.7, §5):

* Resource objects passed as inputs (``ManagedNodeGroup(cluster=...)``) make the stock
  ``MockMonitor`` rehydrate them on its worker thread, which fails with "attached to a
  different loop". While the monitor deserializes inputs, this monitor makes the SDK
  see no resource packages, so references arrive as plain URN strings. The switch is
  thread-local: the program's own thread still rehydrates outputs normally.
* Remote components (``eks:index:Cluster``) have no visible children; their
  ``eksCluster`` output is faked as a reference to a pre-registered resource.

Each run gets a fresh event loop, root stack, mocks and monitor, so runs are isolated.
"""

from __future__ import annotations

import asyncio
import json
import runpy
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import rpc
from pulumi.runtime import settings as runtime_settings
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, Mocks

REPO_ROOT = Path(__file__).resolve().parents[2]
PROGRAM = REPO_ROOT / "__main__.py"
ACCOUNT_ID = "123456789012"
PROJECT = "adze"
DEPLOYER_CALLER = f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/deployer/ci"
# CI roles of the mocked account, as a stack would name them.
DEPLOYER_ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/adze-prod-k8s-admin"
PREVIEW_ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/ci/adze-prod-preview"
# An existing VPC the mocked account has (``aws.ec2.get_vpc`` / ``get_subnet``), for network.mode: existing.
EXISTING_VPC = "vpc-0b5e1e9d7c3a2f100"
EXISTING_SUBNETS = {
    **{f"subnet-0b5e1e9d7c3a2f1{i}{zone}": (EXISTING_VPC, zone) for i in (0, 1) for zone in "abc"},
    "subnet-0f00000000000000a": ("vpc-0f000000000000000", "a"),  # another VPC's
}

_references_as_urns = threading.local()
_get_resource_module = rpc.get_resource_module
_get_resource_package = rpc.get_resource_package


def _module_unless_monitoring(*args: Any) -> Any:
    return None if getattr(_references_as_urns, "on", False) else _get_resource_module(*args)


def _package_unless_monitoring(*args: Any) -> Any:
    return None if getattr(_references_as_urns, "on", False) else _get_resource_package(*args)


rpc.get_resource_module = _module_unless_monitoring
rpc.get_resource_package = _package_unless_monitoring


@dataclass(slots=True)
class Registration:
    typ: str
    name: str
    urn: str
    id: str
    inputs: dict[str, Any]
    parent: str
    dependencies: frozenset[str]
    property_dependencies: dict[str, frozenset[str]]
    protect: bool
    provider: str
    delete_timeout: str

    def all_dependencies(self) -> frozenset[str]:
        deps = set(self.dependencies)
        for urns in self.property_dependencies.values():
            deps |= urns
        return frozenset(deps)


@dataclass(slots=True)
class ProgramRun:
    registrations: list[Registration]
    outputs: dict[str, Any]
    secret_outputs: set[str] = field(default_factory=set)
    region: str = "us-west-2"

    def of_type(self, typ: str) -> list[Registration]:
        return [r for r in self.registrations if r.typ == typ]

    def one(self, typ: str, name_contains: str = "") -> Registration:
        found = [r for r in self.of_type(typ) if name_contains in r.name]
        assert len(found) == 1, f"expected one {typ} named *{name_contains}*, got {[r.name for r in found]}"
        return found[0]

    def one_named(self, typ: str, name: str) -> Registration:
        found = [r for r in self.of_type(typ) if r.name == name]
        assert len(found) == 1, f"expected one {typ} named {name}, got {len(found)}"
        return found[0]

    def by_urn(self, urn: str) -> Registration:
        return next(r for r in self.registrations if r.urn == urn)

    def depends_on(self, dependent: Registration, dependency: Registration) -> bool:
        """Transitively, as Pulumi orders deletes: the dependent goes first."""
        seen, stack = set(), [dependent.urn]
        while stack:
            urn = stack.pop()
            if urn == dependency.urn:
                return True
            if urn in seen:
                continue
            seen.add(urn)
            found = next((r for r in self.registrations if r.urn == urn), None)
            if found:
                stack.extend(found.all_dependencies())
        return False

    def deletion_order(self) -> list[Registration]:
        """An order ``pulumi destroy`` may delete in: a resource goes only after everything that depends on it
        (explicitly, through an input, as a child of it, or through it as provider)."""
        known = {r.urn for r in self.registrations}
        edges: dict[str, set[str]] = {}
        for registration in self.registrations:
            dependencies = set(registration.all_dependencies())
            if registration.parent:
                dependencies.add(registration.parent)
            if registration.provider:
                dependencies.add(registration.provider.rsplit("::", 1)[0])
            edges[registration.urn] = dependencies & known
        dependents: dict[str, set[str]] = {urn: set() for urn in edges}
        for urn, dependencies in edges.items():
            for dependency in dependencies:
                dependents[dependency].add(urn)
        order: list[str] = []
        remaining = set(edges)
        while remaining:
            ready = sorted(urn for urn in remaining if not (dependents[urn] & remaining))
            assert ready, "dependency cycle"
            order += ready
            remaining -= set(ready)
        return [self.by_urn(urn) for urn in order]

    def k8s_objects(self, kind: str) -> Iterator[Registration]:
        for registration in self.registrations:
            if registration.inputs.get("kind") == kind:
                yield registration


class AdzeMocks(Mocks):
    """Outputs shaped like the real providers' (camelCase), derived from inputs where AWS would."""

    def __init__(self, region: str, caller_arn: str = DEPLOYER_CALLER) -> None:
        self.region = region
        self.caller_arn = caller_arn
        self.monitor: RecordingMonitor | None = None
        self._count = 0

    def _physical(self, args: MockResourceArgs) -> str:
        self._count += 1
        return str(args.inputs.get("name") or f"{args.name}-{self._count:07x}")

    def new_resource(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        handler = getattr(self, "_" + args.typ.split(":")[-1].replace("-", "_"), None)
        if args.typ.startswith("eks:"):
            return self._eks(args)
        name = self._physical(args)
        state = {**args.inputs, "name": args.inputs.get("name", name)}
        arn_service = args.typ.split(":")[1].split("/")[0]
        state.setdefault("arn", f"arn:aws:{arn_service}:{self.region}:{ACCOUNT_ID}:{name}")
        if handler:
            state.update(handler(args, name))
        return f"{name}-id", state

    # AWS resource types whose outputs matter to other resources.
    def _Role(self, args: MockResourceArgs, name: str) -> dict[str, Any]:
        return {"arn": f"arn:aws:iam::{ACCOUNT_ID}:role/{name}"}

    def _Policy(self, args: MockResourceArgs, name: str) -> dict[str, Any]:
        return {"arn": f"arn:aws:iam::{ACCOUNT_ID}:policy/{name}"}

    def _Queue(self, args: MockResourceArgs, name: str) -> dict[str, Any]:
        return {
            "arn": f"arn:aws:sqs:{self.region}:{ACCOUNT_ID}:{name}",
            "url": f"https://sqs.{self.region}.amazonaws.com/{ACCOUNT_ID}/{name}",
        }

    def _EventRule(self, args: MockResourceArgs, name: str) -> dict[str, Any]:
        return {"arn": f"arn:aws:events:{self.region}:{ACCOUNT_ID}:rule/{name}"}

    def _Key(self, args: MockResourceArgs, name: str) -> dict[str, Any]:
        return {"arn": f"arn:aws:kms:{self.region}:{ACCOUNT_ID}:key/{name}"}

    def _Repository(self, args: MockResourceArgs, name: str) -> dict[str, Any]:
        return {
            "registryId": ACCOUNT_ID,
            "repositoryUrl": f"{ACCOUNT_ID}.dkr.ecr.{self.region}.amazonaws.com/{name}",
        }

    def _Image(self, args: MockResourceArgs, name: str) -> dict[str, Any]:
        return {"ref": f"{args.inputs['tags'][0]}@sha256:{'ab' * 32}", "digest": f"sha256:{'ab' * 32}"}

    def _eks(self, args: MockResourceArgs) -> tuple[str, dict[str, Any]]:
        if args.typ != "eks:index:Cluster":
            return f"{args.name}-id", {}
        assert self.monitor is not None
        cluster_name = args.inputs["name"]
        issuer = f"oidc.eks.{self.region}.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
        eks_cluster = self.monitor.fake_child(
            "aws:eks/cluster:Cluster",
            cluster_name,
            {
                "name": cluster_name,
                "arn": f"arn:aws:eks:{self.region}:{ACCOUNT_ID}:cluster/{cluster_name}",
                "endpoint": f"https://EXAMPLE.gr7.{self.region}.eks.amazonaws.com",
                "vpcConfig": {"clusterSecurityGroupId": "sg-0eks0cluster0sg"},
            },
        )
        return f"{cluster_name}-id", {
            "eksCluster": eks_cluster,
            "kubeconfigJson": json.dumps({"apiVersion": "v1", "kind": "Config", "clusters": []}),
            "oidcProviderArn": f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/{issuer}",
            "oidcIssuer": issuer,
        }

    def _vpc(self, args: MockCallArgs) -> Any:
        vpc_id = args.args.get("id")
        if vpc_id != EXISTING_VPC and vpc_id not in {v for v, _ in EXISTING_SUBNETS.values()}:
            return {}, [("id", "no matching EC2 VPC found")]
        return {"id": vpc_id, "cidrBlock": "10.70.0.0/16",
                "arn": f"arn:aws:ec2:{self.region}:{ACCOUNT_ID}:vpc/{vpc_id}"}

    def _subnet(self, args: MockCallArgs) -> Any:
        subnet_id = args.args.get("id")
        if subnet_id not in EXISTING_SUBNETS:
            return {}, [("id", "no matching EC2 Subnet found")]
        vpc_id, zone = EXISTING_SUBNETS[subnet_id]
        return {"id": subnet_id, "vpcId": vpc_id, "availabilityZone": f"{self.region}{zone}"}

    def call(self, args: MockCallArgs) -> Any:
        if args.token == "aws:ec2/getVpc:getVpc":
            return self._vpc(args)
        if args.token == "aws:ec2/getSubnet:getSubnet":
            return self._subnet(args)
        results: dict[str, Callable[[], dict[str, Any]]] = {
            "aws:index/getPartition:getPartition": lambda: {
                "id": "aws",
                "partition": "aws",
                "dnsSuffix": "amazonaws.com",
                "reverseDnsPrefix": "com.amazonaws",
            },
            "aws:index/getRegion:getRegion": lambda: {
                "id": self.region,
                "name": self.region,
                "region": self.region,
                "endpoint": f"ec2.{self.region}.amazonaws.com",
                "description": self.region,
            },
            "aws:index/getCallerIdentity:getCallerIdentity": lambda: {
                "id": ACCOUNT_ID,
                "accountId": ACCOUNT_ID,
                "arn": self.caller_arn,
                "userId": "AROAEXAMPLE:ci",
            },
            "aws:index/getAvailabilityZones:getAvailabilityZones": lambda: {
                "id": self.region,
                "names": [f"{self.region}{zone}" for zone in "abcd"],
                "zoneIds": [f"use-az{index}" for index in range(1, 5)],
            },
            "aws:ecr/getAuthorizationToken:getAuthorizationToken": lambda: {
                "id": ACCOUNT_ID,
                "userName": "AWS",
                "password": "token",
                "authorizationToken": "QVdTOnRva2Vu",
                "proxyEndpoint": f"https://{ACCOUNT_ID}.dkr.ecr.{self.region}.amazonaws.com",
                "expiresAt": "2030-01-01T00:00:00Z",
            },
        }
        if args.token not in results:
            raise AssertionError(f"unexpected invoke {args.token}: mock it or avoid it")
        return results[args.token]()


class RecordingMonitor(MockMonitor):
    def __init__(self, mocks: AdzeMocks) -> None:
        super().__init__(mocks)
        mocks.monitor = self
        self.registrations: list[Registration] = []
        self._lock = threading.Lock()

    def fake_child(self, typ: str, name: str, state: dict[str, Any]) -> dict[str, Any]:
        """Register a resource the eks plugin would create; returns its wire-format reference."""
        urn = self.make_urn("", typ, f"{name}-fake-child")
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, f"{name}-id", state)
        return {rpc._special_sig_key: rpc._special_resource_sig, "urn": urn, "id": f"{name}-id"}

    def RegisterResource(self, request: Any) -> Any:
        _references_as_urns.on = True
        try:
            response = super().RegisterResource(request)
            inputs = (
                rpc.deserialize_properties(request.object) if request.type != "pulumi:pulumi:Stack" else {}
            )
        finally:
            _references_as_urns.on = False
        if request.type != "pulumi:pulumi:Stack":
            registration = Registration(
                typ=request.type,
                name=request.name,
                urn=response.urn,
                id=response.id,
                inputs=inputs,
                parent=request.parent,
                dependencies=frozenset(request.dependencies),
                property_dependencies={k: frozenset(v.urns) for k, v in request.propertyDependencies.items()},
                protect=bool(request.protect),
                provider=request.provider,
                delete_timeout=request.customTimeouts.delete,
            )
            with self._lock:
                self.registrations.append(registration)
        return response


def pulumi_yaml_defaults() -> dict[str, Any]:
    declared = yaml.safe_load((REPO_ROOT / "Pulumi.yaml").read_text())["config"]
    return {f"{PROJECT}:{key}": spec["default"] for key, spec in declared.items() if "default" in spec}


def stack_file_config(stack: str) -> dict[str, Any]:
    return dict(yaml.safe_load((REPO_ROOT / f"Pulumi.{stack}.yaml").read_text())["config"])


def _wire(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def run_program(config: Mapping[str, Any], *, stack: str = "test", caller_arn: str = DEPLOYER_CALLER) -> ProgramRun:
    """Run ``__main__.py`` with ``config`` (fully qualified keys, Pulumi.yaml defaults applied first)."""
    run, error = _execute(config, stack, caller_arn)
    if error is not None:
        raise error
    return run


def run_failing_program(
    config: Mapping[str, Any], *, stack: str = "test", caller_arn: str = DEPLOYER_CALLER
) -> tuple[BaseException, ProgramRun]:
    """Run a program that must fail; returns the error and whatever was registered before it."""
    run, error = _execute(config, stack, caller_arn)
    assert error is not None, "the program was expected to fail"
    return error, run


def _execute(config: Mapping[str, Any], stack: str, caller_arn: str) -> tuple[ProgramRun, BaseException | None]:
    merged = {**pulumi_yaml_defaults(), **config}
    region = str(merged.get("aws:region", "us-west-2"))
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    runtime_settings.ROOT.set(None)
    mocks = AdzeMocks(region, caller_arn)
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
    pulumi.runtime.set_all_config({key: _wire(value) for key, value in merged.items()})
    outputs: dict[str, Any] = {}

    secret_outputs: set[str] = set()

    async def note_secrets(exported: dict[str, Any]) -> None:
        for key, value in exported.items():
            if isinstance(value, pulumi.Output) and await value.is_secret():
                secret_outputs.add(key)

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        runpy.run_path(str(PROGRAM), run_name="__main__")
        root = runtime_settings.get_root_resource()
        exported = dict(getattr(root, "outputs", {}))
        if not exported:
            return pulumi.Output.from_input(None)
        secrets = pulumi.Output.from_input(asyncio.ensure_future(note_secrets(exported)))
        return pulumi.Output.all(pulumi.Output.all(**exported).apply(outputs.update), secrets)

    error: BaseException | None = None
    try:
        program()
    except Exception as err:  # the caller decides whether failure was expected
        error = err
    finally:
        loop.close()
        asyncio.set_event_loop(None)
    run = ProgramRun(
        registrations=list(monitor.registrations),
        outputs=outputs,
        secret_outputs=secret_outputs,
        region=region,
    )
    return run, error


def run_stack(stack: str, *, caller_arn: str = DEPLOYER_CALLER, **overrides: Any) -> ProgramRun:
    """Run with an example stack file, optionally overriding keys (``{"adze:identityMode": "irsa"}``)."""
    return run_program({**stack_file_config(stack), **overrides}, stack=stack, caller_arn=caller_arn)


@dataclass(slots=True)
class RunCache:
    """Program runs shared by a test module (each run is ~1 s)."""

    runs: dict[str, ProgramRun] = field(default_factory=dict)

    def get(self, key: str, factory: Callable[[], ProgramRun]) -> ProgramRun:
        if key not in self.runs:
            self.runs[key] = factory()
        return self.runs[key]
