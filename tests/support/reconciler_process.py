"""The reconciler as a real process on the real control plane, with the permissions the Pulumi program grants.

``reconciler_identity(plane, namespace)`` applies the ServiceAccount, ClusterRoles, Roles and bindings that
the Pulumi program registers (``render_rbac.py`` runs the program under mocks once per test session), moved
into ``namespace`` (the ServiceAccount, its namespaced Roles and bindings, the subjects) with the cluster-wide
bindings renamed per namespace; every Role in another namespace (``kube-system``) keeps its namespace. It then
asks the TokenRequest API for a token of that ServiceAccount and writes a kubeconfig with it: the process
holds exactly the Pulumi code's RBAC and nothing else (no client certificate, no ``system:masters``).

``ReconcilerProcess`` runs ``python -m reconciler run`` (through ``timed_reconciler.py``, which only shortens
periods) with that kubeconfig, moto as AWS, and the leader-election Lease in the test's namespace; its
JSON log lines are kept in a file. ``denied_requests()`` lists, from the API server's audit log, every
request of that identity the authorizer refused: a test that ends with any fails (see
``docs/control-plane.md``).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.control_plane import REPO, ApiError, ControlPlane, Identity, scaled

from reconciler.cloud.aws.offline import OfflineAWS

RENDER_SCRIPT = Path(__file__).with_name("render_rbac.py")
LAUNCHER = Path(__file__).with_name("timed_reconciler.py")
CLUSTER_ROLE_KINDS = ("ClusterRole",)
BINDING_KINDS = ("ClusterRoleBinding", "RoleBinding")
# Periods that make one end-to-end scenario last seconds instead of minutes (Karpenter's defaults otherwise).
FAST_TIMINGS: dict[str, float] = {
    "lifecycle_resync": 1.0,
    "termination_requeue": 0.5,
    "min_drain_time": 1.0,
    "command_poll": 0.5,
    "gc_fast_interval": 2.0,
    "gc_min_age": 10.0,
    "status_interval": 2.0,
    "provisioner_recheck": 2.0,
    "expiration_max_wait": 5.0,
    "instance_termination_poll": 1.0,
}
FAST_SETTINGS: dict[str, float] = {
    "batch_idle_duration": 0.5,
    "batch_max_duration": 3.0,
    "consolidation_validation_wait": 2.0,
    "disruption_poll_period": 1.0,
}


@functools.cache
def rendered_rbac(stack: str = "dev") -> tuple[dict[str, Any], ...]:
    """What the Pulumi program of ``stack`` deploys for the reconciler's identity (JSON manifests)."""
    result = subprocess.run(
        [sys.executable, str(RENDER_SCRIPT), stack], capture_output=True, text=True, check=False, cwd=REPO
    )
    if result.returncode != 0:
        raise RuntimeError(f"rendering the Pulumi program's RBAC failed:\n{result.stderr[-4000:]}")
    return tuple(json.loads(result.stdout))


def rbac_for_namespace(rendered: tuple[dict[str, Any], ...], namespace: str) -> list[dict[str, Any]]:
    """The rendered objects with the reconciler's namespace replaced by ``namespace``."""
    account = next(m for m in rendered if m["kind"] == "ServiceAccount")
    home = account["metadata"]["namespace"]
    moved = []
    for manifest in rendered:
        copy = json.loads(json.dumps(manifest))
        metadata = copy["metadata"]
        if metadata.get("namespace") == home:
            metadata["namespace"] = namespace
        if copy["kind"] == "ClusterRoleBinding":
            metadata["name"] = f"{metadata['name']}-{namespace}"
        for subject in copy.get("subjects") or []:
            if subject.get("namespace") == home:
                subject["namespace"] = namespace
        moved.append(copy)
    return moved


@dataclass
class ReconcilerIdentity:
    namespace: str
    service_account: str
    identity: Identity
    objects: list[dict[str, Any]]

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"


def reconciler_identity(plane: ControlPlane, namespace: str, stack: str = "dev") -> ReconcilerIdentity:
    objects = rbac_for_namespace(rendered_rbac(stack), namespace)
    for manifest in sorted(objects, key=lambda m: m["kind"] in BINDING_KINDS):  # roles before bindings
        plane.apply(manifest)
    account = next(m for m in objects if m["kind"] == "ServiceAccount")["metadata"]["name"]
    token = plane.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 4 * 3600}},
    )["status"]["token"]
    return ReconcilerIdentity(namespace, account, plane.token_identity(f"reconciler-{namespace}", token), objects)


def remove_cluster_bindings(plane: ControlPlane, identity: ReconcilerIdentity) -> None:
    """The per-namespace cluster-wide bindings (namespaced objects go with the namespace)."""
    for manifest in identity.objects:
        if manifest["kind"] == "ClusterRoleBinding":
            with contextlib.suppress(ApiError):
                plane.request(
                    "DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{manifest['metadata']['name']}",
                    expect=(200, 202, 404),
                )


def register_eks_cluster(aws: OfflineAWS, kubernetes_version: str) -> None:
    """So ``eks:DescribeCluster`` answers for the cluster (its version; the endpoint comes from CLUSTER_ENDPOINT)."""
    eks = aws.client("eks")
    with contextlib.suppress(eks.exceptions.ResourceInUseException):
        eks.create_cluster(
            name=aws.cluster,
            version=kubernetes_version,
            roleArn=f"arn:aws:iam::{aws.account_id}:role/eks-cluster",
            resourcesVpcConfig={"subnetIds": list(aws.subnet_ids.values())},
        )


@dataclass
class ReconcilerProcess:
    """One ``python -m reconciler run`` process; ``start()``, then ``stop()`` (SIGTERM) or ``kill()`` (SIGKILL)."""

    plane: ControlPlane
    aws: OfflineAWS
    identity: ReconcilerIdentity
    workdir: Path
    name: str = "reconciler"
    env: Mapping[str, str] = field(default_factory=dict)
    timings: Mapping[str, float] = field(default_factory=lambda: dict(FAST_TIMINGS))
    settings: Mapping[str, float] = field(default_factory=lambda: dict(FAST_SETTINGS))
    process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def environment(self) -> dict[str, str]:
        minor = ".".join(self.plane.version.lstrip("v").split(".")[:2])
        register_eks_cluster(self.aws, minor)
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "AWS_"))}
        return {
            **inherited,
            "PYTHONPATH": str(REPO),
            "KUBECONFIG": str(self.identity.identity.kubeconfig),
            "CLUSTER_NAME": self.aws.cluster,
            "CLUSTER_ENDPOINT": self.plane.url,
            "CLUSTER_CA_BUNDLE": base64.b64encode(self.plane.ca.cert_pem).decode(),
            "AWS_REGION": self.aws.region,
            "AWS_ENDPOINT_URL": self.aws.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.aws.credentials["aws_access_key_id"],
            "AWS_SECRET_ACCESS_KEY": self.aws.credentials["aws_secret_access_key"],
            "LEADER_ELECTION_NAMESPACE": self.identity.namespace,
            "POD_NAME": self.name,
            "METRICS_PORT": "0",
            "HEALTH_PROBE_PORT": "0",
            "ADZE_TEST_TIMINGS": json.dumps(dict(self.timings)),
            "ADZE_TEST_SETTINGS": json.dumps(dict(self.settings)),
            **self.env,
        }

    def start(self) -> ReconcilerProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as sink:
            self.process = subprocess.Popen(
                [sys.executable, str(LAUNCHER)], cwd=REPO, env=self.environment(),
                stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout``): the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(scaled(timeout))
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def lines(self) -> list[dict[str, Any]]:
        """The JSON log lines so far."""
        if not self.log_path.exists():
            return []
        found = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                with contextlib.suppress(json.JSONDecodeError):
                    found.append(json.loads(line))
        return found

    def tail(self, count: int = 60) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-count:])

    def wait_for_log(self, message: str, timeout: float = 60.0) -> dict[str, Any]:
        """The first log line with this message (polls the log file; the process must stay alive)."""
        deadline = time.monotonic() + scaled(timeout)
        while time.monotonic() < deadline:
            for line in self.lines():
                if line.get("message") == message:
                    return line
            if not self.alive():
                raise AssertionError(f"{self.name} exited ({self.process and self.process.returncode}):\n{self.tail()}")
            time.sleep(0.2)
        raise TimeoutError(f"{self.name} did not log {message!r} within {scaled(timeout):.0f} s:\n{self.tail()}")


def denied_requests(plane: ControlPlane, identity: ReconcilerIdentity) -> list[str]:
    """Every request of the reconciler's identity the API server refused as forbidden (403) and the authorizer
    did not allow, from its audit log (a 403 from admission, such as an Event for a pod of a namespace being
    deleted, is not an RBAC gap)."""
    return [
        f"{e['verb']} {e.get('requestURI')}"
        for e in plane.audit_events(
            lambda e: (e.get("user") or {}).get("username") == identity.user
            and (e.get("responseStatus") or {}).get("code") == 403
            and (e.get("annotations") or {}).get("authorization.k8s.io/decision") != "allow"
        )
    ]
