"""Volume topology: bound PersistentVolumes, StorageClass allowedTopologies, binding modes, CSI limits."""

from __future__ import annotations

from typing import Any

from sched_factories import node, nodepool, pod, requirement, solve

from reconciler.model import labels as wk


def claim(name: str, *, volume: str | None = None, storage_class: str | None = "ebs") -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if volume:
        spec["volumeName"] = volume
    if storage_class:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec,
            "status": {"phase": "Bound" if volume else "Pending"}}


def volume(name: str, zone: str, *, local: bool = False) -> dict[str, Any]:
    terms = [{"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": [zone]}]}]
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}, "nodeAffinity": {"required": {"nodeSelectorTerms": terms}},
                            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": name}}
    if local:
        spec = {"local": {"path": "/mnt"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": wk.HOSTNAME, "operator": "In", "values": ["gone-node"]}]}]}}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def storage_class(name: str = "ebs", *, mode: str = "WaitForFirstConsumer",
                  zones: list[str] | None = None) -> dict[str, Any]:
    manifest: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                "metadata": {"name": name}, "provisioner": "ebs.csi.aws.com",
                                "volumeBindingMode": mode}
    if zones:
        manifest["allowedTopologies"] = [{"matchLabelExpressions": [{"key": wk.ZONE, "values": zones}]}]
    return manifest


def with_claim(name: str, claim_name: str) -> dict[str, Any]:
    return pod(name, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}])


def zone_values(result) -> list[str]:
    return requirement(result.nodeclaims[0].manifest(), wk.ZONE)["values"]


def test_bound_volume_pins_the_zone():
    objects = [nodepool(), storage_class(), volume("pv-1", "test-zone-2"), claim("data", volume="pv-1"),
               with_claim("db", "data")]
    assert zone_values(solve(objects)) == ["test-zone-2"]


def test_storage_class_allowed_topologies_limit_zones_for_unbound_claims():
    objects = [nodepool(), storage_class(zones=["test-zone-3"]), claim("data"), with_claim("db", "data")]
    assert zone_values(solve(objects)) == ["test-zone-3"]


def test_wait_for_first_consumer_without_topologies_leaves_the_zone_open():
    objects = [nodepool(), storage_class(), claim("data"), with_claim("db", "data")]
    result = solve(objects)
    assert len(result.nodeclaims) == 1 and requirement(result.nodeclaims[0].manifest(), wk.ZONE) is None


def test_local_volume_hostname_affinity_is_ignored():
    objects = [nodepool(), storage_class(), volume("pv-local", "", local=True), claim("data", volume="pv-local"),
               with_claim("db", "data")]
    assert len(solve(objects).nodeclaims) == 1


def test_volume_zone_must_agree_with_the_pod_and_pool():
    pool = nodepool(requirements=[{"key": wk.ZONE, "operator": "In", "values": ["test-zone-1"]}])
    objects = [pool, storage_class(), volume("pv-1", "test-zone-2"), claim("data", volume="pv-1"),
               with_claim("db", "data")]
    result = solve(objects)
    assert not result.nodeclaims and "default/db" in result.pending


def test_unusable_claims_make_karpenter_ignore_the_pod():
    missing = solve([nodepool(), with_claim("db", "nope")])
    assert "PersistentVolumeClaim default/nope (volume data) does not exist" in missing.pending["default/db"]
    immediate = solve([nodepool(), storage_class(mode="Immediate"), claim("data"), with_claim("db", "data")])
    assert "Immediate binding" in immediate.pending["default/db"]


def test_existing_node_must_be_in_the_volume_zone():
    objects = [nodepool(), node("n1", zone="test-zone-1"), storage_class(), volume("pv-1", "test-zone-2"),
               claim("data", volume="pv-1"), with_claim("db", "data")]
    result = solve(objects)
    assert not result.existing and zone_values(result) == ["test-zone-2"]


def test_csi_attach_limits_on_existing_nodes():
    csi_node = {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n1"},
                "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "n1", "allocatable": {"count": 1}}]}}
    objects = [nodepool(), node("n1"), csi_node, storage_class(), claim("a"), claim("b"),
               pod("has-a", node_name="n1", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "a"}}]),
               with_claim("wants-b", "b")]
    result = solve(objects)
    assert not result.existing and len(result.nodeclaims) == 1
