"""A ``kubectl get ... -A -o yaml`` dump of a snapshot's cluster, with what a real API server adds.

``bench/commands.py`` times the snapshot commands on this, as a user runs them on a real cluster: one
``kind: List`` whose items carry what ``kubectl get -o yaml`` prints and a snapshot drops on load —
resourceVersions, generateNames, pod-template hashes, the kubelet's defaults (service-account token
volume and mounts, tolerations, DNS policy, termination message paths), container statuses, node
addresses, images, node info and heartbeats — plus the ReplicaSets and Deployments ``kubectl get all``
lists. (kubectl has omitted managedFields since 1.21, so the dump has none.) Loading it gives the
snapshot's cluster again: the sanitizer strips the extra fields, except the defaults a real server gives
every pod (tolerations of not-ready/unreachable, scheduler name, grace period), which scheduling reads.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

IMAGES = (
    "602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni:v1.18.3-eksbuild.2",
    "602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni-init:v1.18.3-eksbuild.2",
    "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/kube-proxy:v1.30.3-minimal-eksbuild.5",
    "602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon/aws-network-policy-agent:v1.1.2-eksbuild.2",
    "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/pause:3.5",
    "public.ecr.aws/aws-observability/aws-for-fluent-bit:2.32.2",
    "public.ecr.aws/eks-distro/kubernetes-csi/node-driver-registrar:v2.11.1-eks-1-30-10",
    "public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver:v1.33.0",
)


def _digest(*parts: str, length: int = 10) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


def _version(counter: list[int]) -> str:
    counter[0] += 1
    return str(1_000_000 + counter[0])


def _pod(pod: dict[str, Any], counter: list[int], index: int) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    metadata, spec = pod["metadata"], pod.setdefault("spec", {})
    metadata["resourceVersion"] = _version(counter)
    owner = next(iter(metadata.get("ownerReferences") or []), None)
    if owner is not None and owner.get("kind") == "ReplicaSet":
        metadata["generateName"] = f"{owner['name']}-"
        metadata.setdefault("labels", {}).setdefault("pod-template-hash", _digest(owner["name"]))
    token = f"kube-api-access-{_digest(metadata['name'], length=5)}"
    for container in spec.get("containers") or []:
        container.update({
            "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                    "fieldPath": "metadata.name"}}},
                    {"name": "LOG_LEVEL", "value": "info"}],
            "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": token,
                              "readOnly": True}],
        })
    spec.setdefault("tolerations", [])
    spec["tolerations"] = [*spec["tolerations"], *(
        {"effect": "NoExecute", "key": key, "operator": "Exists", "tolerationSeconds": 300}
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"))]
    spec.setdefault("volumes", []).append({"name": token, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
        {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    "path": "namespace"}]}}]}})
    spec.update({"dnsPolicy": "ClusterFirst", "enableServiceLinks": True, "securityContext": {},
                 "serviceAccount": "default", "serviceAccountName": "default"})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    status = pod.setdefault("status", {})
    if spec.get("nodeName") and status.get("phase") == "Running":
        started = status.get("startTime", "2026-01-01T00:00:00Z")
        ip = f"10.0.{index // 250 % 250}.{index % 250 + 1}"
        status.update({
            "hostIP": f"10.1.{index // 250 % 250}.{index % 250 + 1}",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "qosClass": "Burstable",
            "containerStatuses": [{
                "containerID": f"containerd://{_digest(metadata['name'], c['name'], length=64)}",
                "image": c.get("image", "x"),
                "imageID": f"{c.get('image', 'x')}@sha256:{_digest(c.get('image', 'x'), length=64)}",
                "lastState": {}, "name": c["name"], "ready": True, "restartCount": 0, "started": True,
                "state": {"running": {"startedAt": started}},
            } for c in spec.get("containers") or []],
        })
        status["conditions"] = [*(status.get("conditions") or []), *(
            {"lastProbeTime": None, "lastTransitionTime": started, "status": "True", "type": kind}
            for kind in ("PodReadyToStartContainers", "Initialized", "ContainersReady"))]
    return pod


def _node(node: dict[str, Any], counter: list[int], index: int) -> dict[str, Any]:
    node = copy.deepcopy(node)
    metadata, status = node["metadata"], node.setdefault("status", {})
    metadata["resourceVersion"] = _version(counter)
    labels = metadata.setdefault("labels", {})
    labels.update({
        "beta.kubernetes.io/arch": labels.get("kubernetes.io/arch", "amd64"),
        "beta.kubernetes.io/os": "linux",
        "k8s.io/cloud-provider-aws": _digest("cluster", length=32),
        "topology.k8s.aws/zone-id": "use1-az" + str(index % 6 + 1),
    })
    metadata.setdefault("annotations", {}).update({
        "alpha.kubernetes.io/provided-node-ip": f"10.1.{index // 250 % 250}.{index % 250 + 1}",
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "csi.volume.kubernetes.io/nodeid": '{"ebs.csi.aws.com":"i-' + _digest(metadata["name"], length=17) + '"}',
    })
    heartbeat = "2026-01-01T00:00:00Z"
    status["conditions"] = [
        *({"lastHeartbeatTime": heartbeat, "lastTransitionTime": heartbeat, "message": f"kubelet has no {kind}",
           "reason": f"KubeletHasNo{kind}", "status": "False", "type": kind}
          for kind in ("MemoryPressure", "DiskPressure", "PIDPressure")),
        *(status.get("conditions") or []),
    ]
    status.update({
        "addresses": [{"address": f"10.1.{index // 250 % 250}.{index % 250 + 1}", "type": "InternalIP"},
                      {"address": f"{metadata['name']}.ec2.internal", "type": "InternalDNS"},
                      {"address": f"{metadata['name']}.ec2.internal", "type": "Hostname"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "images": [{"names": [image, f"{image.split(':')[0]}@sha256:{_digest(image, length=64)}"],
                    "sizeBytes": 10_000_000 + 1_000_003 * position} for position, image in enumerate(IMAGES)],
        "nodeInfo": {
            "architecture": labels.get("kubernetes.io/arch", "amd64"),
            "bootID": _digest(metadata["name"], "boot", length=36),
            "containerRuntimeVersion": "containerd://1.7.20", "kernelVersion": "6.1.102-111.182.amzn2023.x86_64",
            "kubeProxyVersion": "v1.30.2-eks-1552ad0", "kubeletVersion": "v1.30.2-eks-1552ad0",
            "machineID": _digest(metadata["name"], "machine", length=32), "operatingSystem": "linux",
            "osImage": "Amazon Linux 2023.5.20240819", "systemUUID": _digest(metadata["name"], "uuid", length=36),
        },
    })
    return node


def _workloads(pods: list[dict[str, Any]], counter: list[int]) -> list[dict[str, Any]]:
    """The ReplicaSets owning the pods and the Deployments owning those, as ``kubectl get all`` would list them
    (for a snapshot that has none: one taken before snapshots kept workloads). Each ReplicaSet has the uid its
    pods' ownerReference names and is controlled by a Deployment of the same name; the ReplicaSet's template
    and selector carry ``pod-template-hash``, the Deployment's do not."""
    owners: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {}
    for pod in pods:
        for ref in pod["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "ReplicaSet":
                owners.setdefault((pod["metadata"].get("namespace", "default"), ref["name"]), (pod, ref))
    result = []
    for (namespace, name), (pod, ref) in sorted(owners.items()):
        labels = pod["metadata"].get("labels") or {}
        plain = {k: v for k, v in labels.items() if k != "pod-template-hash"}
        spec = {"containers": pod["spec"].get("containers") or []}
        replicas = sum(1 for p in pods
                       if any(r.get("name") == name for r in p["metadata"].get("ownerReferences") or []))
        status = {"replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
                  "observedGeneration": 1}
        deployment_uid = _digest("Deployment", namespace, name, length=36)
        result.append({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": _version(counter),
                         "uid": deployment_uid, "generation": 1,
                         "annotations": {"deployment.kubernetes.io/revision": "1"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": plain},
                     "template": {"metadata": {"labels": plain}, "spec": copy.deepcopy(spec)}},
            "status": status,
        })
        result.append({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": _version(counter),
                         "uid": ref.get("uid") or _digest("ReplicaSet", namespace, name, length=36), "generation": 1,
                         "labels": labels, "annotations": {"deployment.kubernetes.io/revision": "1"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                                              "uid": deployment_uid, "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": copy.deepcopy(spec)}},
            "status": {**status, "fullyLabeledReplicas": replicas},
        })
    return result


def kubectl_dump(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The snapshot document's objects as one ``kubectl get -A -o yaml`` List, with a real server's fields."""
    counter = [0]
    items: list[dict[str, Any]] = []
    objects = snapshot["objects"]
    pods = [o for o in objects if o["kind"] == "Pod"]
    for index, manifest in enumerate(objects):
        if manifest["kind"] == "Pod":
            items.append(_pod(manifest, counter, index))
        elif manifest["kind"] == "Node":
            items.append(_node(manifest, counter, index))
        else:
            item = copy.deepcopy(manifest)
            item["metadata"]["resourceVersion"] = _version(counter)
            if item["kind"] in ("NodePool", "NodeClaim", "EC2NodeClass"):
                item["metadata"]["generation"] = 1
            items.append(item)
    if not any(o["kind"] in ("Deployment", "ReplicaSet") for o in objects):
        items.extend(_workloads(pods, counter))
    # Through JSON: no object shared between items (a YAML dump would show anchors no server writes).
    return json.loads(json.dumps({"apiVersion": "v1", "kind": "List", "items": items,
                                  "metadata": {"resourceVersion": ""}}))
