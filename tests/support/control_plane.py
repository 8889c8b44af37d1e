"""A real Kubernetes control plane for the slow end-to-end tests (see docs/control-plane.md).

``ControlPlane.start(workdir)`` runs, on 127.0.0.1 with free ports, the binaries ``scripts/control-plane.sh``
builds: etcd, kube-apiserver (self-signed serving certificate, ServiceAccount token signing keys,
``--authorization-mode=RBAC,Node``, NodeRestriction as on EKS, an audit log of every write),
kube-controller-manager (every default controller: garbage collector, disruption, Deployment, ReplicaSet,
StatefulSet, DaemonSet, Job, node lifecycle, ServiceAccount...) with per-controller ServiceAccount
credentials, kube-scheduler, and kwok as the kubelet of the Nodes annotated ``kwok.x-k8s.io/node: fake``
(Lease and Ready heartbeats, pods Running and Ready, graceful deletion). Nodes themselves come from
``support.eks_nodes`` (one per running moto instance). ``stop()`` ends every process group it started.

Nothing here fakes the API: admin requests go to the real server over TLS with a client certificate.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from support.cluster_pki import CertificateAuthority, Credential, signing_key_pair

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "control-plane.sh"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok")
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
# Admission plugins beyond the defaults, as EKS enables them (NodeRestriction judges what a kubelet may write).
EXTRA_ADMISSION_PLUGINS = ("NodeRestriction", "ExtendedResourceToleration")


def time_scale() -> float:
    """``ADZE_TEST_TIME_SCALE`` (default 1): every deadline of these tests is multiplied by it."""
    raw = os.environ.get("ADZE_TEST_TIME_SCALE", "1")
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"ADZE_TEST_TIME_SCALE={raw!r} is not a number") from None
    if value <= 0:
        raise ValueError(f"ADZE_TEST_TIME_SCALE={raw!r} must be positive")
    return value


def scaled(seconds: float) -> float:
    return seconds * time_scale()


THROTTLED_RETRY_SECONDS = 60.0


class ControlPlaneUnavailable(RuntimeError):
    """The binaries are not built and cannot be (no Go): the tests needing them skip with this message."""


def locate_binaries() -> Path:
    """The built binaries: ``$ADZE_CONTROL_PLANE_BIN``, else ``scripts/control-plane.sh build`` (a no-op when warm)."""
    explicit = os.environ.get("ADZE_CONTROL_PLANE_BIN")
    if explicit:
        directory = Path(explicit)
        missing = [b for b in BINARIES if not (directory / b).is_file()]
        if missing:
            raise ControlPlaneUnavailable(f"ADZE_CONTROL_PLANE_BIN={explicit} lacks {', '.join(missing)}")
        return directory
    found = subprocess.run([str(BUILD_SCRIPT), "path"], capture_output=True, text=True, check=False)
    if found.returncode == 0:
        return Path(found.stdout.strip())
    if shutil.which("go") is None:
        raise ControlPlaneUnavailable(
            "the real control plane is not built and 'go' is not installed: run scripts/control-plane.sh build "
            "on a machine with Go"
        )
    build = subprocess.run([str(BUILD_SCRIPT), "build"], capture_output=True, text=True, check=False)
    if build.returncode != 0:
        raise RuntimeError(f"scripts/control-plane.sh build failed:\n{build.stderr[-4000:]}")
    return Path(subprocess.run([str(BUILD_SCRIPT), "path"], capture_output=True, text=True, check=True).stdout.strip())


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ApiError(RuntimeError):
    def __init__(self, status: int, body: Any, what: str) -> None:
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{what}: HTTP {status}: {message}")
        self.status = status
        self.body = body


@dataclass
class Identity:
    """A client of the apiserver: a kubeconfig on disk, and a TLS context for direct requests."""

    name: str
    kubeconfig: Path
    context: ssl.SSLContext
    token: str | None = None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


@dataclass
class Component:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class ControlPlane:
    """A running control plane; build with ``ControlPlane.start(workdir)``, end with ``stop()``."""

    workdir: Path
    bin: Path
    url: str = ""
    ca: CertificateAuthority = field(default_factory=CertificateAuthority)
    components: list[Component] = field(default_factory=list)
    admin: Identity | None = None
    version: str = ""

    # --- start and stop ---------------------------------------------------------------------------

    @classmethod
    def start(
        cls, workdir: Path, binaries: Path | None = None, *, extra_apiserver_flags: Sequence[str] = ()
    ) -> ControlPlane:
        plane = cls(workdir=workdir, bin=binaries or locate_binaries())
        try:
            plane._start(extra_apiserver_flags)
        except BaseException:
            plane.stop()
            raise
        return plane

    def _start(self, extra_apiserver_flags: Sequence[str]) -> None:
        pki = self.workdir / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        ca_path = pki / "ca.crt"
        ca_path.write_bytes(self.ca.cert_pem)
        serving_cert, serving_key = self.ca.server(
            ["127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"]
        ).write(pki, "apiserver")
        sa_private, sa_public = signing_key_pair()
        (pki / "sa.key").write_bytes(sa_private)
        (pki / "sa.pub").write_bytes(sa_public)
        audit_policy = self.workdir / "audit-policy.json"
        audit_policy.write_text(json.dumps(AUDIT_POLICY))

        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        self._spawn("etcd", [
            "--name=default", f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync", "--log-level=warn",
        ])
        self.url = f"https://127.0.0.1:{api_port}"
        self._spawn("kube-apiserver", [
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
            f"--tls-cert-file={serving_cert}", f"--tls-private-key-file={serving_key}",
            f"--client-ca-file={ca_path}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            "--authorization-mode=RBAC,Node",
            f"--enable-admission-plugins={','.join(EXTRA_ADMISSION_PLUGINS)}",
            "--service-cluster-ip-range=10.96.0.0/16", "--allow-privileged=true", "--profiling=false",
            f"--audit-policy-file={audit_policy}", f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json", "--audit-log-maxsize=0",
            *extra_apiserver_flags,
        ])
        self.admin = self.identity("admin", "kubernetes-admin", ["system:masters"])
        self._wait_ready("kube-apiserver", lambda: self._get_status("/readyz") == 200, 60)
        self.version = self.request("GET", "/version")["gitVersion"]

        kcm = self.identity("kube-controller-manager", "system:kube-controller-manager")
        kcm_port = free_port()
        self._spawn("kube-controller-manager", [
            f"--kubeconfig={kcm.kubeconfig}", f"--authentication-kubeconfig={kcm.kubeconfig}",
            f"--authorization-kubeconfig={kcm.kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={kcm_port}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={ca_path}",
            "--leader-elect=false", "--controllers=*", "--kube-api-qps=100", "--kube-api-burst=200",
            "--cluster-name=adze-test",
        ])
        scheduler = self.identity("kube-scheduler", "system:kube-scheduler")
        scheduler_config = self.workdir / "kube-scheduler.json"
        scheduler_config.write_text(json.dumps({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(scheduler.kubeconfig), "qps": 100, "burst": 200},
            "leaderElection": {"leaderElect": False},
        }))
        scheduler_port = free_port()
        self._spawn("kube-scheduler", [
            f"--config={scheduler_config}", f"--authentication-kubeconfig={scheduler.kubeconfig}",
            f"--authorization-kubeconfig={scheduler.kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={scheduler_port}",
        ])
        # kwok plays the kubelets: a privileged identity, as one process stands in for every node's kubelet.
        kwok = self.identity("kwok", "kwok-kubelets", ["system:masters"])
        self._spawn("kwok", [
            f"--kubeconfig={kwok.kubeconfig}", "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
            "--cidr=10.244.0.0/16", "--node-ip=10.0.0.1", "--server-address=127.0.0.1:0",
            "--node-lease-duration-seconds=40",
        ])
        self._wait_ready("kube-controller-manager", lambda: _healthz(kcm_port), 60)
        self._wait_ready("kube-scheduler", lambda: _healthz(scheduler_port), 60)
        # The ServiceAccount controller made "default": the controller-manager is acting, not only serving.
        self._wait_ready(
            "kube-controller-manager",
            lambda: self._get_status("/api/v1/namespaces/default/serviceaccounts/default") == 200, 60,
        )

    def _spawn(self, name: str, args: Sequence[str]) -> Component:
        log = self.workdir / f"{name}.log"
        with log.open("ab") as sink:
            process = subprocess.Popen(
                [str(self.bin / name), *args], stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stop() ends it and anything it started
            )
        component = Component(name, process, log)
        self.components.append(component)
        return component

    def _wait_ready(self, name: str, ready: Callable[[], bool], seconds: float) -> None:
        deadline = time.monotonic() + scaled(seconds)
        component = next(c for c in self.components if c.name == name)
        while time.monotonic() < deadline:
            if not component.alive():
                raise RuntimeError(f"{name} exited with {component.process.returncode}:\n{component.tail()}")
            with contextlib.suppress(OSError, ssl.SSLError, http.client.HTTPException):
                if ready():
                    return
            time.sleep(0.1)
        raise TimeoutError(f"{name} not ready after {scaled(seconds):.0f} s:\n{component.tail()}")

    def stop(self, grace: float = 10.0) -> None:
        """Stop the components newest first (kwok ... etcd), each by SIGTERM to its process group, SIGKILL
        after ``grace`` seconds."""
        for component in reversed(self.components):
            _signal_group(component.process, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                component.process.wait(grace)
            _signal_group(component.process, signal.SIGKILL)
            component.process.wait()
        self.components.clear()

    def leftovers(self) -> list[str]:
        """Processes with this control plane's work directory in their command line (every component has
        it in a flag): after ``stop()``, none."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if str(self.workdir) in command:
                    found.append(f"{entry.name}: {command.strip()}")
        return found

    def check_alive(self) -> None:
        """Raise naming any component that has died (with the end of its log)."""
        for component in self.components:
            if not component.alive():
                raise RuntimeError(
                    f"{component.name} exited with {component.process.returncode}:\n{component.tail()}"
                )

    # --- identities -------------------------------------------------------------------------------

    def identity(self, name: str, user: str, groups: Sequence[str] = ()) -> Identity:
        """A client-certificate identity (user + groups) with its kubeconfig in ``workdir/identities``."""
        return self._identity(name, self.ca.client(user, list(groups)))

    def _identity(self, name: str, credential: Credential) -> Identity:
        directory = self.workdir / "identities"
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = credential.write(directory, name)
        kubeconfig = directory / f"{name}.kubeconfig"
        kubeconfig.write_text(json.dumps(self.kubeconfig_for(user={
            "client-certificate-data": base64.b64encode(credential.cert_pem).decode(),
            "client-key-data": base64.b64encode(credential.key_pem).decode(),
        })))
        context = ssl.create_default_context(cadata=self.ca.cert_pem.decode())
        context.load_cert_chain(cert, key)
        return Identity(name, kubeconfig, context)

    def token_identity(self, name: str, token: str) -> Identity:
        """A bearer-token identity (a ServiceAccount's), with its kubeconfig."""
        directory = self.workdir / "identities"
        directory.mkdir(parents=True, exist_ok=True)
        kubeconfig = directory / f"{name}.kubeconfig"
        kubeconfig.write_text(json.dumps(self.kubeconfig_for(user={"token": token})))
        kubeconfig.chmod(0o600)
        return Identity(name, kubeconfig, ssl.create_default_context(cadata=self.ca.cert_pem.decode()), token)

    def kubeconfig_for(self, user: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "adze-test", "cluster": {
                "server": self.url,
                "certificate-authority-data": base64.b64encode(self.ca.cert_pem).decode(),
            }}],
            "users": [{"name": "user", "user": dict(user)}],
            "contexts": [{"name": "adze-test", "context": {"cluster": "adze-test", "user": "user"}}],
            "current-context": "adze-test",
        }

    # --- requests ---------------------------------------------------------------------------------

    def request(
        self, method: str, path: str, body: Any = None, *, expect: Sequence[int] = (200, 201, 202), **options: Any
    ) -> Any:
        """``raw_request`` (same options), answering the decoded JSON body, or raising ``ApiError`` when the
        status is not in ``expect``. A 429 (the server not ready for it: a watch cache still initializing,
        priority and fairness shedding) was not acted on, so it is retried for up to ``THROTTLED_RETRY_SECONDS``."""
        deadline = time.monotonic() + scaled(THROTTLED_RETRY_SECONDS)
        status, decoded = self.raw_request(method, path, body, **options)
        while status == 429 and 429 not in expect and time.monotonic() < deadline:
            time.sleep(1.0)
            status, decoded = self.raw_request(method, path, body, **options)
        if status not in expect:
            raise ApiError(status, decoded, f"{method} {path}")
        return decoded

    def raw_request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        identity: Identity | None = None,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> tuple[int, Any]:
        """One request as ``identity`` (admin by default): (status, decoded JSON body or text)."""
        who = identity or self.admin
        assert who is not None, "the control plane is not started"
        host, port = self.url.removeprefix("https://").rsplit(":", 1)
        connection = http.client.HTTPSConnection(host, int(port), context=who.context, timeout=timeout)
        try:
            target = path + ("?" + urlencode(query) if query else "")
            payload = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
            headers = {"Accept": "application/json", **who.headers()}
            if payload is not None:
                headers["Content-Type"] = content_type
            connection.request(method, target, body=payload, headers=headers)
            response = connection.getresponse()
            raw = response.read()
        finally:
            connection.close()
        try:
            decoded: Any = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            decoded = raw.decode(errors="replace")
        return response.status, decoded

    def _get_status(self, path: str) -> int:
        return self.raw_request("GET", path, timeout=5)[0]

    def apply(
        self, manifest: Mapping[str, Any], *, identity: Identity | None = None, manager: str = "adze-tests"
    ) -> Any:
        """Server-side apply (create or update) of one object."""
        return self.request(
            "PATCH", object_path(manifest), manifest, identity=identity,
            query={"fieldManager": manager, "force": "true"}, content_type="application/apply-patch+yaml",
        )

    def kubectl(self, *args: str, identity: Identity | None = None, check: bool = True, stdin: str | None = None,
                timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl as ``identity`` (admin by default); ``check`` raises with its stderr."""
        who = identity or self.admin
        assert who is not None
        done = subprocess.run(
            [str(self.bin / "kubectl"), f"--kubeconfig={who.kubeconfig}", *args],
            capture_output=True, text=True, input=stdin, check=False, timeout=scaled(timeout),
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return done

    # --- namespaces and audit -----------------------------------------------------------------------

    def create_namespace(self, name: str) -> None:
        self.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": name}})

    def delete_namespace(self, name: str) -> None:
        self.request("DELETE", f"/api/v1/namespaces/{name}", expect=(200, 202, 404))

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def audit_events(self, predicate: Callable[[dict[str, Any]], bool] = lambda _e: True) -> Iterator[dict[str, Any]]:
        """Audit events matching ``predicate`` (``AUDIT_POLICY``: every write, and every request of a
        ServiceAccount under test)."""
        if not self.audit_log.exists():
            return
        with self.audit_log.open() as lines:
            for line in lines:
                with contextlib.suppress(json.JSONDecodeError):
                    event = json.loads(line)
                    if event.get("stage") == "ResponseComplete" and predicate(event):
                        yield event


# Every write at Metadata level (who, what, verb, response code); reads only from ServiceAccounts outside
# kube-system (the reconcilers under test: a refused read is an RBAC gap too); not kwok's Lease heartbeats.
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}],
         "userGroups": ["system:masters", "system:nodes"]},
        {"level": "None", "userGroups": ["system:serviceaccounts:kube-system"], "verbs": ["get", "list", "watch"]},
        {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
        {"level": "None", "verbs": ["get", "list", "watch"]},
        {"level": "Metadata"},
    ],
}


def object_path(manifest: Mapping[str, Any]) -> str:
    """The REST path of one object from its apiVersion, kind, name and namespace (built-in and CRD kinds)."""
    api_version = manifest["apiVersion"]
    kind = manifest["kind"]
    metadata = manifest["metadata"]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    namespace = metadata.get("namespace")
    scope = f"/namespaces/{quote(namespace)}" if namespace else ""
    return f"{base}{scope}/{plural(kind)}/{quote(metadata['name'])}"


_IRREGULAR_PLURALS = {"EC2NodeClass": "ec2nodeclasses", "PodDisruptionBudget": "poddisruptionbudgets"}


def plural(kind: str) -> str:
    if kind in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[kind]
    lower = kind.lower()
    if lower.endswith(("s", "x", "ch")):
        return lower + "es"
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + "s"


def _healthz(port: int) -> bool:
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=ssl._create_unverified_context(), timeout=5)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    finally:
        connection.close()


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)
