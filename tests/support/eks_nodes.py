"""EC2 instances joining the real control plane as EKS nodes do: the boot half of a kubelet, and the cloud
controller manager's node deletion.

For every running instance of the cluster (EC2 tag ``kubernetes.io/cluster/<name>``) on moto, ``EksNodes``:

- reads the instance's user data (``DescribeInstanceAttribute userData``, what the node reads from IMDS) and
  registers the Node **as the kubelet**: a client certificate for ``system:node:<name>`` in ``system:nodes``, so
  the Node authorizer and NodeRestriction judge the labels, exactly as on EKS. The Node carries the labels
  and taints (startup taints and ``karpenter.sh/unregistered`` included) of ``--node-labels`` /
  ``--register-with-taints`` (or Bottlerocket's settings), the kubelet's own labels (hostname, os, arch),
  the cloud provider's (instance type, zone, region), ``spec.providerID`` and the capacity and allocatable
  the kubelet computes from the instance type and its KubeletConfiguration;
- hands the Node to kwok (annotation ``kwok.x-k8s.io/node: fake``), which keeps its Lease and Ready condition
  and runs the pods kube-scheduler binds to it;
- removes startup taints whose keys are in ``startup_taint_keys`` once Adze has registered the node (the
  daemon a real startup taint waits for: a CNI agent, a GPU driver...);
- deletes the Node once its instance is shutting down, terminated or gone (the cloud node lifecycle).

Registration refusals (a label NodeRestriction forbids, a malformed user data) are kept in ``errors`` and
retried: a node that cannot join stays out, as it would on EKS.
"""

from __future__ import annotations

import base64
import contextlib
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from support.control_plane import KWOK_ANNOTATION, ApiError, ControlPlane, Identity
from support.node_bootstrap import BootstrapError, KubeletRegistration, read_user_data

from reconciler.api.amifamily import FAMILIES
from reconciler.cloud.aws.allocatable import KubeletOverrides, capacity_and_overhead
from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.preset import load_catalog
from reconciler.model import labels as wk

REGISTERED_LABEL = "karpenter.sh/registered"
GONE_STATES = ("shutting-down", "terminated")


@dataclass
class JoinedNode:
    name: str
    instance_id: str
    provider_id: str


@dataclass
class EksNodes:
    """Start with ``start()`` (a background thread polling EC2 and the API), end with ``stop()``."""

    plane: ControlPlane
    aws: OfflineAWS
    interval: float = 0.5
    startup_taint_keys: frozenset[str] = frozenset()
    nodes: dict[str, JoinedNode] = field(default_factory=dict)  # instance id -> node, while it runs
    joined: list[JoinedNode] = field(default_factory=list)  # every registration, in order
    errors: list[str] = field(default_factory=list)
    _identities: dict[str, Identity] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> EksNodes:
        self._ec2 = self.aws.client("ec2")
        self._catalog = {entry.info.name: entry.info for entry in load_catalog(self.aws.region).entries}
        self._thread = threading.Thread(target=self._run, name=f"eks-nodes-{self.aws.cluster}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception as err:  # the stand-in keeps going, as kubelets retry; tests see the error
                self.errors.append(f"{type(err).__name__}: {err}")
            self._stop.wait(self.interval)

    def step(self) -> None:
        instances = self._instances()
        existing = {n["spec"]["providerID"]: n for n in self._nodes({_provider_id(i) for i in instances})}
        for instance in instances:
            provider_id = _provider_id(instance)
            if instance["State"]["Name"] == "running" and provider_id not in existing:
                self._register(instance)
        live = {_provider_id(i) for i in instances if i["State"]["Name"] not in GONE_STATES}
        for provider_id, node in existing.items():
            if provider_id not in live:
                self._delete(node)
            elif self.startup_taint_keys:
                self._remove_startup_taints(node)

    # --- EC2 ------------------------------------------------------------------------------------------

    def _instances(self) -> list[dict[str, Any]]:
        pages = self._ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": f"tag:kubernetes.io/cluster/{self.aws.cluster}", "Values": ["owned"]}]
        )
        return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]

    def _user_data(self, instance_id: str) -> str:
        answer = self._ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
        encoded = (answer.get("UserData") or {}).get("Value") or ""
        return base64.b64decode(encoded).decode() if encoded else ""

    def _root_volume_bytes(self, instance: dict[str, Any]) -> int | None:
        volumes = [m["Ebs"]["VolumeId"] for m in instance.get("BlockDeviceMappings") or [] if "Ebs" in m]
        if not volumes:
            return None
        sizes = [v["Size"] for v in self._ec2.describe_volumes(VolumeIds=volumes)["Volumes"]]
        return max(sizes) * 2**30 if sizes else None

    # --- the kubelet's registration -------------------------------------------------------------------

    def _register(self, instance: dict[str, Any]) -> None:
        instance_id = instance["InstanceId"]
        try:
            registration = read_user_data(self._user_data(instance_id))
        except BootstrapError as err:
            self._error(f"{instance_id}: {err}")
            return
        name = node_name(instance)
        node = self._node_manifest(instance, name, registration)
        identity = self._identities.get(name) or self.plane.identity(
            f"node-{name}", f"system:node:{name}", ["system:nodes"]
        )
        self._identities[name] = identity
        # Recorded before the POST: a test watching Nodes may see this one the moment it is created.
        joined = JoinedNode(name, instance_id, _provider_id(instance))
        self.nodes[instance_id] = joined
        self.joined.append(joined)
        try:
            self.plane.request("POST", "/api/v1/nodes", node, identity=identity)
        except ApiError as err:
            del self.nodes[instance_id]
            self.joined.remove(joined)
            if err.status != 409:
                self._error(f"{instance_id}: the kubelet's registration of {name} was refused: {err}")

    def _node_manifest(self, instance: dict[str, Any], name: str, registration: KubeletRegistration) -> dict[str, Any]:
        instance_type = instance["InstanceType"]
        info = self._catalog.get(instance_type)
        if info is None:
            raise BootstrapError(f"{instance_type} is not in the {self.aws.region} catalogue")
        family = FAMILIES.get(registration.family) or FAMILIES["AL2023"]
        capacity, overhead = capacity_and_overhead(
            info.shape(), family=family,
            kubelet=KubeletOverrides.from_manifest(_allocatable_fields(registration.config), path="kubelet config"),
            ephemeral_storage_milli=_milli(self._root_volume_bytes(instance)),
        )
        zone = instance["Placement"]["AvailabilityZone"]
        labels = {
            **registration.labels,
            wk.HOSTNAME: name,
            wk.OS: "linux",
            wk.ARCH: info.arch,
            wk.INSTANCE_TYPE: instance_type,
            wk.ZONE: zone,
            wk.REGION: self.aws.region,
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": {KWOK_ANNOTATION: "fake"}},
            "spec": {"providerID": _provider_id(instance), "taints": registration.taints},
            "status": {
                "capacity": capacity.to_manifest(),
                "allocatable": (capacity - overhead).to_manifest(),
                "addresses": [
                    {"type": "InternalIP", "address": instance.get("PrivateIpAddress", "")},
                    {"type": "Hostname", "address": name},
                ],
                "nodeInfo": {
                    "architecture": info.arch, "operatingSystem": "linux", "kubeletVersion": self.plane.version,
                    "containerRuntimeVersion": "containerd://1.7.27", "osImage": f"{registration.family} (kwok)",
                    "kernelVersion": "", "kubeProxyVersion": "", "machineID": "", "systemUUID": "", "bootID": "",
                },
            },
        }

    # --- startup agents and the cloud node lifecycle ----------------------------------------------------

    def _remove_startup_taints(self, node: dict[str, Any]) -> None:
        if (node["metadata"].get("labels") or {}).get(REGISTERED_LABEL) != "true":
            return
        taints = node["spec"].get("taints") or []
        kept = [t for t in taints if t["key"] not in self.startup_taint_keys]
        if len(kept) != len(taints):
            with contextlib.suppress(ApiError):  # a conflict: the next pass retries
                self.plane.request(
                    "PATCH", f"/api/v1/nodes/{node['metadata']['name']}",
                    [{"op": "test", "path": "/metadata/resourceVersion", "value": node["metadata"]["resourceVersion"]},
                     {"op": "replace", "path": "/spec/taints", "value": kept}],
                    content_type="application/json-patch+json",
                )

    def _delete(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        with contextlib.suppress(ApiError):
            self.plane.request("DELETE", f"/api/v1/nodes/{name}", expect=(200, 202, 404))
        for instance_id, joined in list(self.nodes.items()):
            if joined.name == name:
                del self.nodes[instance_id]

    def _nodes(self, provider_ids: set[str]) -> list[dict[str, Any]]:
        """The Nodes of this cluster's instances (other tests' clusters share the API server)."""
        mine = provider_ids | {j.provider_id for j in self.nodes.values()}
        items = self.plane.request("GET", "/api/v1/nodes")["items"]
        return [n for n in items if (n.get("spec") or {}).get("providerID") in mine]

    def _error(self, message: str) -> None:
        if message not in self.errors:
            self.errors.append(message)


def node_name(instance: dict[str, Any]) -> str:
    """The instance-ID host name EKS gives nodes in subnets with resource-name host names
    (``i-0123456789abcdef0.ec2.internal``): unique even though every test cluster's VPC reuses one CIDR."""
    private_dns = instance.get("PrivateDnsName") or ""
    domain = private_dns.split(".", 1)[1] if "." in private_dns else "ec2.internal"
    return f"{instance['InstanceId']}.{domain}"


def _provider_id(instance: dict[str, Any]) -> str:
    return f"aws:///{instance['Placement']['AvailabilityZone']}/{instance['InstanceId']}"


def _allocatable_fields(config: dict[str, Any]) -> dict[str, Any]:
    keys: Iterable[str] = ("maxPods", "podsPerCore", "kubeReserved", "systemReserved", "evictionHard")
    return {k: config[k] for k in keys if k in config}


def _milli(amount: int | None) -> int | None:
    return None if amount is None else amount * 1000
