"""AWS capacity/overhead formulas against the numbers EKS and Karpenter publish."""

from __future__ import annotations

import pytest

from reconciler.api.amifamily import AL2, AL2023, BOTTLEROCKET, WINDOWS2022
from reconciler.cloud.aws.allocatable import (
    KubeletConfigError,
    KubeletOverrides,
    Shape,
    capacity_and_overhead,
    eni_limited_pods,
    eviction_threshold,
    kube_reserved_cpu,
    max_pods,
    memory_capacity,
    overhead_for,
)
from reconciler.model.quantity import parse_quantity
from reconciler.model.resources import Resources


def allocatable(shape: Shape, **kwargs: object) -> dict[str, str]:
    capacity, overhead = capacity_and_overhead(shape, **kwargs)  # type: ignore[arg-type]
    return (capacity - overhead).to_manifest()


@pytest.mark.parametrize(
    ("vcpus", "expected"), [(1, "940m"), (2, "1930m"), (4, "3920m"), (8, "7910m"), (96, "95690m")]
)
def test_allocatable_cpu_follows_the_reserved_ladder(vcpus: int, expected: str) -> None:
    assert allocatable(Shape(vcpus, 8192, "amd64", 3, 10))["cpu"] == expected


def test_kube_reserved_cpu_truncates_each_range_like_karpenter() -> None:
    assert kube_reserved_cpu(1000) == 60
    assert kube_reserved_cpu(1500) == 65
    assert kube_reserved_cpu(4000) == 80
    assert kube_reserved_cpu(6000) == 85


def test_a1_large_matches_karpenters_published_allocatable() -> None:
    # Karpenter's generated instance-type docs (AL2): cpu 1930m, memory 3055Mi, pods 29, ephemeral 17Gi.
    result = allocatable(Shape(2, 4096, "arm64", 3, 10), family=AL2)
    assert result == {"cpu": "1930m", "memory": "3055Mi", "pods": "29", "ephemeral-storage": "17Gi"}


def test_memory_capacity_subtracts_vm_overhead_and_graviton_cma() -> None:
    assert memory_capacity(8192, "amd64") == parse_quantity("7577Mi")  # 8192 - ceil(614.4)
    assert memory_capacity(4096, "arm64") == parse_quantity("3729Mi")  # (4096-64) - ceil(302.4)
    assert memory_capacity(8192, "amd64", vm_overhead_percent=0.0) == parse_quantity("8Gi")


def test_eni_limited_pods_matches_eks_max_pods_table() -> None:
    assert eni_limited_pods(3, 10) == 29  # m5.large
    assert eni_limited_pods(15, 50) == 737  # p4d.24xlarge, default card
    assert eni_limited_pods(2, 2) == 4  # t3.nano
    assert eni_limited_pods(3, 10, reserved_enis=1) == 20
    assert eni_limited_pods(1, 10, reserved_enis=1) == 0


def test_max_pods_override_and_pods_per_core() -> None:
    assert max_pods(29, 2, AL2023, KubeletOverrides(max_pods=110)) == 110
    assert max_pods(29, 2, AL2023, KubeletOverrides(pods_per_core=4)) == 8
    assert max_pods(29, 2, AL2023, KubeletOverrides(max_pods=110, pods_per_core=10)) == 20
    # Bottlerocket ignores podsPerCore; Windows is not ENI-limited.
    assert max_pods(29, 2, BOTTLEROCKET, KubeletOverrides(pods_per_core=4)) == 29
    assert max_pods(29, 2, WINDOWS2022) == 110


def test_kube_reserved_memory_uses_eni_pods_for_al2023_but_real_pods_for_bottlerocket() -> None:
    shape = Shape(2, 8192, "amd64", 3, 10)
    kubelet = KubeletOverrides(max_pods=10)
    _, al2023 = capacity_and_overhead(shape, family=AL2023, kubelet=kubelet)
    _, bottlerocket = capacity_and_overhead(shape, family=BOTTLEROCKET, kubelet=kubelet)
    # 11Mi x 29 + 255Mi + 100Mi eviction vs 11Mi x 10 + 255Mi + 100Mi.
    assert al2023["memory"] == parse_quantity("674Mi")
    assert bottlerocket["memory"] == parse_quantity("465Mi")


def test_kubelet_overrides_replace_and_add_reservations() -> None:
    kubelet = KubeletOverrides.from_manifest(
        {
            "kubeReserved": {"cpu": "200m", "memory": "1Gi"},
            "systemReserved": {"cpu": "100m", "memory": "100Mi"},
            "evictionHard": {"memory.available": "5%", "nodefs.available": "100%"},
        }
    )
    capacity, overhead = capacity_and_overhead(Shape(4, 16384, "amd64", 4, 15), kubelet=kubelet)
    assert overhead["cpu"] == parse_quantity("300m")
    memory_eviction = -(-capacity["memory"] // 1000 * 5 // 100) * 1000
    assert overhead["memory"] == parse_quantity("1Gi") + parse_quantity("100Mi") + memory_eviction
    # 100% disables the nodefs threshold; kube-reserved storage (1Gi) remains.
    assert overhead["ephemeral-storage"] == parse_quantity("1Gi")


def test_eviction_threshold_defaults_and_absolute_override() -> None:
    default = eviction_threshold(parse_quantity("8Gi"), parse_quantity("20Gi"))
    assert default == Resources.of(memory="100Mi", ephemeral_storage="2Gi")
    absolute = eviction_threshold(
        parse_quantity("8Gi"), parse_quantity("20Gi"), {"memory.available": "500Mi"}
    )
    assert absolute["memory"] == parse_quantity("500Mi")


@pytest.mark.parametrize(
    ("kubelet", "message"),
    [
        ({"maxPods": -1}, "spec.kubelet.maxPods"),
        ({"maxPods": "ten"}, "spec.kubelet.maxPods"),
        ({"kubeReserved": {"cpu": "lots"}}, "spec.kubelet.kubeReserved.cpu"),
        ({"evictionHard": {"memory.available": "150%"}}, "spec.kubelet.evictionHard.memory.available"),
        ({"systemReserved": ["cpu"]}, "spec.kubelet.systemReserved"),
    ],
)
def test_bad_kubelet_config_names_the_field(kubelet: dict[str, object], message: str) -> None:
    with pytest.raises(KubeletConfigError, match=message.replace(".", r"\.")):
        KubeletOverrides.from_manifest(kubelet)


def test_overhead_for_a_catalogue_capacity() -> None:
    capacity = Resources.of(cpu="2", memory="4Gi", pods="29")
    overhead = overhead_for(capacity, "amd64")
    assert overhead == Resources.of(cpu="70m", memory=f"{11 * 29 + 255 + 100}Mi")
    with_storage = overhead_for(Resources.of(cpu="2", memory="4Gi", pods="10", ephemeral_storage="20Gi"))
    assert with_storage["ephemeral-storage"] == parse_quantity("3Gi")
