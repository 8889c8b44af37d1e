"""One test's Adze cluster on the shared real control plane: a namespace, an EKS cluster on moto, its nodes
and its reconciler processes; ``close()`` leaves the control plane as it found it.

    with adze_cluster(plane, aws, "t1-scale", workdir) as cluster:
        cluster.apply(cluster.nodeclass())
        cluster.apply(nodepool_manifest)
        reconciler = cluster.start_reconciler()
        wait_for(plane, "/apis/karpenter.sh/v1/nodeclaims", ..., timeout=120)

Tests run one at a time per control plane (pytest-xdist workers each start their own), so the cluster-scoped
Karpenter objects (NodePools, NodeClaims, EC2NodeClasses) present during a test are that test's; ``close()``
stops the reconcilers, terminates the cluster's instances, removes those objects (finalizers cleared: no
reconciler is left to clear them), the cluster's Nodes and the namespace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.control_plane import ApiError, ControlPlane, ControlPlaneUnavailable, locate_binaries, object_path
from support.eks_nodes import EksNodes
from support.reconciler_process import (
    ReconcilerIdentity,
    ReconcilerProcess,
    denied_requests,
    reconciler_identity,
    remove_cluster_bindings,
)

from reconciler.cloud.aws.offline import OfflineAWS

KARPENTER_COLLECTIONS = (
    "/apis/karpenter.sh/v1/nodepools",
    "/apis/karpenter.sh/v1/nodeclaims",
    "/apis/karpenter.k8s.aws/v1/ec2nodeclasses",
)


@dataclass
class AdzeCluster:
    plane: ControlPlane
    aws: OfflineAWS
    namespace: str
    workdir: Path
    nodes: EksNodes
    reconcilers: list[ReconcilerProcess] = field(default_factory=list)
    _identity: ReconcilerIdentity | None = None

    @property
    def identity(self) -> ReconcilerIdentity:
        """The reconciler's ServiceAccount with the Pulumi program's RBAC (made on first use)."""
        if self._identity is None:
            self._identity = reconciler_identity(self.plane, self.namespace)
        return self._identity

    def start_reconciler(self, name: str = "reconciler", **options: Any) -> ReconcilerProcess:
        """``python -m reconciler run`` as this cluster's ServiceAccount (options: ``ReconcilerProcess`` fields)."""
        process = ReconcilerProcess(self.plane, self.aws, self.identity, self.workdir, name=name, **options)
        self.reconcilers.append(process)
        return process.start()

    def nodeclass(self, name: str = "default", **spec: Any) -> dict[str, Any]:
        """An EC2NodeClass for the moto cluster's subnets, security group, AL2023 and node role."""
        manifest = self.aws.nodeclass(name, **spec)
        for generated in ("uid", "generation"):
            manifest["metadata"].pop(generated, None)
        return manifest

    def apply(self, manifest: dict[str, Any]) -> Any:
        """Server-side apply as admin; namespaced kinds without a namespace land in the test's."""
        return self.plane.apply(self._placed(manifest))

    def create(self, manifest: dict[str, Any]) -> Any:
        placed = self._placed(manifest)
        collection = object_path(placed).rsplit("/", 1)[0]
        return self.plane.request("POST", collection, placed)

    def _placed(self, manifest: dict[str, Any]) -> dict[str, Any]:
        if manifest["kind"] in NAMESPACED_KINDS and not manifest["metadata"].get("namespace"):
            manifest = {**manifest, "metadata": {**manifest["metadata"], "namespace": self.namespace}}
        return manifest

    def denied_requests(self) -> list[str]:
        return denied_requests(self.plane, self._identity) if self._identity else []

    def close(self) -> None:
        for process in self.reconcilers:
            process.stop()
        self.nodes.stop()
        self._terminate_instances()
        for collection in KARPENTER_COLLECTIONS:
            _delete_all(self.plane, collection)
        joined = {n.name for n in self.nodes.joined}
        _delete_all(self.plane, "/api/v1/nodes", only=lambda n: n["metadata"]["name"] in joined)
        if self._identity is not None:
            remove_cluster_bindings(self.plane, self._identity)
        self.plane.delete_namespace(self.namespace)

    def _terminate_instances(self) -> None:
        ec2 = self.aws.client("ec2")
        running = [
            i["InstanceId"]
            for r in ec2.describe_instances(Filters=[
                {"Name": f"tag:kubernetes.io/cluster/{self.aws.cluster}", "Values": ["owned"]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ])["Reservations"]
            for i in r["Instances"]
        ]
        if running:
            ec2.terminate_instances(InstanceIds=running)


# Kinds the tests create that live in a namespace (the rest, Karpenter's and Nodes, are cluster-scoped).
NAMESPACED_KINDS = frozenset({
    "Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "PodDisruptionBudget", "Service",
    "ConfigMap", "ServiceAccount", "Role", "RoleBinding", "PersistentVolumeClaim", "Lease",
})


def _delete_all(plane: ControlPlane, collection: str, only: Any = lambda _obj: True) -> None:
    try:
        items = plane.request("GET", collection)["items"]
    except ApiError as err:
        if err.status == 404:  # the CRDs are not installed
            return
        raise
    for item in items:
        if not only(item):
            continue
        path = f"{collection}/{item['metadata']['name']}"
        with contextlib.suppress(ApiError):
            if item["metadata"].get("finalizers"):
                plane.request("PATCH", path, {"metadata": {"finalizers": None}},
                              content_type="application/merge-patch+json")
            plane.request("DELETE", path, expect=(200, 202, 404))


@contextlib.contextmanager
def adze_cluster(plane: ControlPlane, aws: OfflineAWS, namespace: str, workdir: Path,
                 startup_taint_keys: frozenset[str] = frozenset()) -> Iterator[AdzeCluster]:
    plane.create_namespace(namespace)
    nodes = EksNodes(plane, aws, startup_taint_keys=startup_taint_keys).start()
    cluster = AdzeCluster(plane, aws, namespace, workdir, nodes)
    try:
        yield cluster
    finally:
        cluster.close()


@contextlib.contextmanager
def prepared_control_plane(workdir: Path) -> Iterator[ControlPlane]:
    """A started control plane with ``prepare_control_plane`` done, stopped afterwards with no process left;
    the calling test skips when the binaries are not built and Go is absent."""
    import pytest

    try:
        binaries = locate_binaries()
    except ControlPlaneUnavailable as err:
        pytest.skip(str(err))
    plane = ControlPlane.start(workdir, binaries)
    try:
        prepare_control_plane(plane)
        yield plane
    finally:
        plane.stop()
    leftovers = plane.leftovers()
    assert not leftovers, f"processes left after the control plane stopped: {leftovers}"


KUBE_DNS_IP = "10.96.0.10"


def prepare_control_plane(plane: ControlPlane) -> None:
    """What every EKS cluster has before Adze arrives: Adze's CRDs (``python -m reconciler crds``, applied
    with kubectl and Established) and the kube-dns Service whose clusterIP nodes get as their DNS server."""
    import subprocess
    import sys

    from support.control_plane import REPO

    crds = subprocess.run([sys.executable, "-m", "reconciler", "crds"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout
    plane.kubectl("apply", "--server-side", "--field-manager=adze-tests", "-f", "-", stdin=crds)
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                  "crd/nodepools.karpenter.sh", "crd/nodeclaims.karpenter.sh", "crd/ec2nodeclasses.karpenter.k8s.aws")
    plane.apply({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
        "spec": {"clusterIP": KUBE_DNS_IP, "selector": {"k8s-app": "kube-dns"},
                 "ports": [{"name": "dns", "port": 53, "protocol": "UDP"},
                           {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]},
    })
