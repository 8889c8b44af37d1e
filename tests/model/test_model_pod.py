"""Pods, nodes, selectors and taints built from manifests."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model import labels as wk
from reconciler.model.meta import ManifestError
from reconciler.model.pod import Pod, effective_requests
from reconciler.model.resources import Resources
from reconciler.model.selectors import LabelSelector
from reconciler.model.taints import Taint, Toleration, is_ephemeral, untolerated


def container(cpu: str | None = None, memory: str | None = None, **extra) -> dict:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    return {"name": "c", "resources": {"requests": requests}, **extra}


def test_effective_requests_sum_containers_and_take_the_largest_init_container():
    spec = {"containers": [container("1", "1Gi"), container("500m", "1Gi")],
            "initContainers": [container("2", "100Mi"), container("100m", "4Gi")]}
    assert effective_requests(spec) == Resources.of(cpu="2", memory="4Gi")


def test_sidecars_add_to_the_steady_state_and_to_later_init_containers():
    spec = {"containers": [container("1")],
            "initContainers": [container("500m", restartPolicy="Always"), container("1200m")]}
    # Steady state 1 + 0.5; the plain init container runs next to the sidecar: 1.2 + 0.5.
    assert effective_requests(spec) == Resources.of(cpu="1700m")


def test_overhead_and_pod_level_resources():
    spec = {"containers": [container("1", "1Gi")], "resources": {"requests": {"cpu": "3"}}}
    assert effective_requests(spec, Resources.of(cpu="250m")) == Resources.of(cpu="3250m", memory="1Gi")


def test_limits_default_missing_requests():
    spec = {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}
    assert effective_requests(spec) == Resources.of(cpu="2", memory="1Gi")


def test_runtime_class_overhead_applies_when_admission_did_not_set_it():
    manifest = {"metadata": {"name": "p", "namespace": "ns"},
                "spec": {"runtimeClassName": "kata", "containers": [container("1")]}}
    pod = Pod.from_manifest(manifest, runtime_class_overhead={"kata": Resources.of(cpu="500m")})
    assert pod.requests == Resources.of(cpu="1500m")
    assert pod.scheduling_requests.amount("pods") == 1000


def test_pod_parses_scheduling_fields():
    manifest = {
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"},
                     "annotations": {wk.DO_NOT_DISRUPT: "true"},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}]},
        "spec": {
            "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}],
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "priority": 100,
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}],
            "topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": wk.ZONE, "whenUnsatisfiable": "ScheduleAnyway",
                                           "labelSelector": {"matchLabels": {"app": "x"}}, "minDomains": 3}],
        },
        "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }
    pod = Pod.from_manifest(manifest)
    assert pod.key == "ns/p" and pod.owner is not None and pod.owner.kind == "ReplicaSet"
    assert pod.do_not_disrupt == "true" and pod.priority == 100
    assert [str(p) for p in pod.host_ports] == ["0.0.0.0:8080/TCP"]
    assert [v.claim_name for v in pod.volumes] == ["data", "p-scratch"]
    assert pod.topology_spread[0].min_domains == 3 and not pod.topology_spread[0].is_hard
    assert pod.is_provisionable()


def test_pods_kube_scheduler_placed_or_owned_by_daemonsets_are_not_provisionable():
    base = {"metadata": {"name": "p"}, "spec": {"containers": []}}
    assert Pod.from_manifest(base).is_provisionable()  # no PodScheduled condition yet: assumed unschedulable
    scheduled = {**base, "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}
    assert not Pod.from_manifest(scheduled).is_provisionable()
    daemon = {"metadata": {"name": "d", "ownerReferences": [{"kind": "DaemonSet", "name": "x", "controller": True}]},
              "spec": {}}
    assert not Pod.from_manifest(daemon).is_provisionable()
    nominated = {**base, "status": {"nominatedNodeName": "n1"}}
    assert not Pod.from_manifest(nominated).is_provisionable()


def test_bad_pod_fields_name_the_path():
    manifest = {"metadata": {"name": "p", "namespace": "ns"},
                "spec": {"containers": [container("lots")]}}
    with pytest.raises(ManifestError, match=r"Pod ns/p: spec.containers\[0\].resources.requests.cpu"):
        Pod.from_manifest(manifest)
    manifest = {"metadata": {"name": "p"}, "spec": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["x"]}]}]}}}}}
    with pytest.raises(ManifestError, match=r"nodeSelectorTerms\[0\].matchExpressions\[0\].values"):
        Pod.from_manifest(manifest)


def test_label_selectors():
    selector = LabelSelector.from_manifest({"matchLabels": {"app": "x"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["web", "api"]},
        {"key": "canary", "operator": "DoesNotExist"}]})
    assert selector.matches({"app": "x", "tier": "web"})
    assert not selector.matches({"app": "x", "tier": "db"})
    assert not selector.matches({"app": "x", "tier": "web", "canary": "1"})
    assert not LabelSelector.from_manifest(None).matches({})
    assert LabelSelector.from_manifest({}).matches({"anything": "1"})


def test_tolerations_match_kubernetes_rules():
    taint = Taint("gpu", "NoSchedule", "true")
    assert Toleration("gpu", "Equal", "true", "NoSchedule").tolerates(taint)
    assert not Toleration("gpu", "Equal", "false").tolerates(taint)
    assert Toleration("", "Exists").tolerates(taint)  # empty key + Exists tolerates everything
    assert not Toleration("gpu", "Exists", effect="NoExecute").tolerates(taint)
    assert Toleration("level", "Gt", "3").tolerates(Taint("level", "NoSchedule", "5"))
    assert untolerated([taint, Taint("x", "PreferNoSchedule")], [Toleration("gpu", "Exists")]) == [
        Taint("x", "PreferNoSchedule")]


def test_ephemeral_taints():
    assert is_ephemeral(Taint("node.kubernetes.io/not-ready", "NoExecute"))
    assert is_ephemeral(Taint("readiness.k8s.io/network", "NoSchedule"))
    assert is_ephemeral(Taint(wk.UNREGISTERED_TAINT_KEY, "NoExecute"))
    assert not is_ephemeral(Taint("node.kubernetes.io/unreachable", "NoExecute"))
    assert not is_ephemeral(Taint("dedicated", "NoSchedule"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]), st.integers(0, 10**7)),
                max_size=4),
       st.lists(st.tuples(st.sampled_from(["cpu", "memory", "pods"]), st.integers(0, 10**7)), max_size=3))
def test_scheduling_requests_are_kept_once_asked_and_equal_a_fresh_sum(first: list, second: list) -> None:
    """The memo equals requests + one pod slot, survives repeated reads, and never leaks into equality
    or a ``replace``d pod (which starts afresh)."""
    pod = Pod(namespace="default", name="p", uid="u", requests=Resources(first))
    untouched = Pod(namespace="default", name="p", uid="u", requests=Resources(first))
    fresh = Resources(first) + Resources({"pods": 1000})
    assert pod.scheduling_requests == fresh
    assert pod.scheduling_requests is pod.scheduling_requests  # kept, not summed again
    assert pod == untouched
    changed = replace(pod, requests=Resources(second))
    assert changed.scheduling_requests == Resources(second) + Resources({"pods": 1000})
    assert pod.scheduling_requests == fresh
