"""Invalid scenario files exit 2 with one line that names the offending key path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from reconciler.cli import main

CATALOG = {
    "zones": ["z1"],
    "instanceTypes": [
        {
            "name": "t1",
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"},
            "offerings": [{"capacityType": "on-demand", "zone": "z1", "price": 0.1}],
        }
    ],
}
POOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default"},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [],
            }
        }
    },
}

BAD_OPERATOR_POOL = {
    **POOL,
    "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                    "name": "default"},
                                   "requirements": [{"key": "a", "operator": "Maybe"}]}}},
}


MANAGED_NODE_WITHOUT_PODS = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "z1", "karpenter.sh/nodepool": "default"}},
    "spec": {"providerID": "aws:///z1/i-0123456789abcdef0"},
    "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": None}},
}


def deployment(name: str, replicas: int) -> dict[str, object]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c"}]}}}}


def scenario(**overrides: object) -> dict[str, object]:
    document: dict[str, object] = {
        "name": "t",
        "catalog": CATALOG,
        "objects": [POOL],
        "steps": [{"provision": {}}],
    }
    document.update(overrides)
    return document


def with_type(**changes: object) -> dict[str, object]:
    instance_type = {**CATALOG["instanceTypes"][0], **changes}  # type: ignore[index]
    return scenario(catalog={"zones": ["z1"], "instanceTypes": [instance_type]})


CASES = [
    ("not-a-map", "(document)"),
    (scenario(bogus=1), "bogus: unknown top-level key"),
    (scenario(settings={"batchIdleDuration": "soon"}), "settings.batchIdleDuration"),
    (scenario(settings={"preferencePolicy": "Maybe"}), "settings.preferencePolicy"),
    (scenario(settings={"featureGates": {"Nope": True}}), "settings.featureGates"),
    (scenario(settings={"clock": "yesterday"}), "settings.clock"),
    (scenario(settings={"colour": "blue"}), "settings.colour: unknown setting"),
    (scenario(catalog=None), "catalog: required"),
    (scenario(catalog={"preset": "gcp-mars-1"}), "catalog.preset"),
    (scenario(catalog={"instanceTypes": []}), "catalog: no instance types"),
    (
        with_type(capacity={"cpu": "lots", "memory": "1Gi", "pods": "1"}),
        "catalog.instanceTypes[0].capacity.cpu",
    ),
    (with_type(capacity={"cpu": "1", "pods": "1"}), "catalog.instanceTypes[0].capacity.memory"),
    (with_type(arch="sparc"), "catalog.instanceTypes[0].arch"),
    (
        with_type(offerings=[{"capacityType": "cheap", "zone": "z1", "price": 1}]),
        "catalog.instanceTypes[0].offerings[0].capacityType",
    ),
    (
        with_type(offerings=[{"capacityType": "spot", "zone": "z1", "price": -1}]),
        "catalog.instanceTypes[0].offerings[0].price",
    ),
    (
        with_type(offerings=[{"capacityType": "spot", "zone": "z1", "price": 1, "colour": "red"}]),
        "catalog.instanceTypes[0].offerings[0].colour",
    ),
    (scenario(objects={"kind": "Pod"}), "objects: expected a list"),
    (scenario(objects=[{"kind": "Pod", "metadata": {"name": "p"}}]), "objects[0].apiVersion"),
    (scenario(objects=[{"apiVersion": "v1", "kind": "Pod", "metadata": {}}]), "objects[0].metadata.name"),
    (
        scenario(objects=[{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "replicas": -2}]),
        "objects[0].replicas",
    ),
    (scenario(objects=[BAD_OPERATOR_POOL]), "objects[0].spec.template.spec.requirements[0].operator"),
    (scenario(objects=[POOL, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                              "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}]),
     "objects[1].spec.containers[0].resources.requests.cpu"),
    (scenario(objects=[{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {}}]),
     "objects[0].spec.template: required"),
    (scenario(steps=[{"apply": [{**POOL, "spec": {"weight": 0, "template": POOL["spec"]["template"]}}]}]),  # type: ignore[index]
     "steps[0].apply[0].spec.weight"),
    (scenario(steps=[{"launch": {}}]), "steps[0].launch: unknown step"),
    (scenario(steps=[{"provision": {}, "disrupt": {}}]), "steps[0]: a step is a map with exactly one key"),
    (scenario(steps=[{"advance": "3 minutes"}]), "steps[0].advance"),
    (scenario(steps=[{"provision": {"launch": "later"}}]), "steps[0].provision.launch"),
    (scenario(steps=[{"disrupt": {"until": "forever"}}]), "steps[0].disrupt.until"),
    (scenario(steps=[{"disrupt": {"budget": 3}}]), "steps[0].disrupt.budget: unknown option"),
    (scenario(steps=[{"interrupt": {"kind": "spot_interrupted"}}]), "steps[0].interrupt.node"),
    (scenario(steps=[{"interrupt": {"node": "n", "kind": "meteor"}}]), "steps[0].interrupt.kind"),
    (scenario(steps=[{"unavailable": [{"zone": "z1"}]}]), "steps[0].unavailable[0].instanceType"),
    (scenario(steps=[{"unavailable": [{"instanceType": "nope"}]}]), "steps[0].unavailable[0].instanceType"),
    (scenario(steps=[{"delete": [{"name": "x"}]}]), "steps[0].delete[0]"),
    (scenario(steps=[{"apply": [{"kind": "Pod"}]}]), "steps[0].apply[0].apiVersion"),
    (scenario(objects=[POOL, MANAGED_NODE_WITHOUT_PODS]), "objects[1].status.capacity.pods: quantity must be"),
    (scenario(settings={"clock": "9999-12-31T23:59:59Z"}, steps=[{"advance": "1m"}]),
     "steps[0].advance: the simulated clock would leave the years 0001-9999"),
    (scenario(objects=[{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "replicas": 10**6}]),
     "objects[0].replicas: 1000000 is above the maximum 100000"),
    (scenario(objects=[POOL, *(deployment(f"d{i}", 100_000) for i in range(6))]),
     "objects: 600,000 pods declared at once"),
    (scenario(objects=[POOL, deployment("a", 60_000), deployment("b", 30_000)],
              steps=[{"apply": [deployment("c", 5_000)]}, {"delete": [{"kind": "Deployment", "name": "c"}]},
                     {"apply": [deployment("b", 40_000)]}, {"apply": [deployment("d", 5_000)]}]),
     "steps[3].apply: 105,000 pods declared at once"),
]


@pytest.mark.parametrize(("document", "expected"), CASES, ids=[c[1][:40] for c in CASES])
def test_invalid_scenarios_exit_2_with_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: object, expected: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(document))
    assert main(["simulate", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert expected in lines[0]
    assert "Traceback" not in captured.err


def test_unreadable_and_malformed_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read scenario file" in capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text("steps: [\n")
    assert main(["simulate", str(broken)]) == 2
    assert "line" in capsys.readouterr().err
