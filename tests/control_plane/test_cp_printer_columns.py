"""Issue 24, 4(i): ``kubectl get nodepools,nodeclaims,ec2nodeclasses`` on the real control plane shows
Karpenter's columns, filled with live values.

The columns expected are Karpenter v1's (its CRDs' additionalPrinterColumns), written out here rather than
read from our generator, and the values are checked against what the cluster holds: the NodeClaim's
instance type and zone are those of its EC2 instance on moto, its NODE the Node that instance registered.
Along the way this is the smallest live scale-up: the reconciler process (with the Pulumi program's RBAC)
launches a node for pending pods, the node joins, kube-scheduler binds the pods.
"""

from __future__ import annotations

from typing import Any

from support.adze_cluster import AdzeCluster
from support.cluster_watch import Objects, wait_for
from support.cp_manifests import deployment, is_ready, nodepool

# Karpenter v1's printer columns (kubectl get / kubectl get -o wide).
NODEPOOL_COLUMNS = ["NAME", "NODECLASS", "NODES", "READY", "AGE"]
NODEPOOL_WIDE = [*NODEPOOL_COLUMNS, "WEIGHT", "CPU", "MEMORY"]
NODECLAIM_COLUMNS = ["NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"]
NODECLAIM_WIDE = [*NODECLAIM_COLUMNS, "IMAGEID", "ID", "NODEPOOL", "NODECLASS", "DRIFTED"]
NODECLASS_COLUMNS = ["NAME", "READY", "AGE"]
NODECLASS_WIDE = [*NODECLASS_COLUMNS, "ROLE"]


def tables(output: str) -> dict[str, tuple[list[str], list[dict[str, str]]]]:
    """kubectl's blank-line separated tables -> resource prefix -> (headers, rows by header), each row cut
    at the headers' positions (kubectl aligns cells under them; a cell may be empty)."""
    found: dict[str, tuple[list[str], list[dict[str, str]]]] = {}
    for block in output.strip().split("\n\n"):
        header, *lines = block.splitlines()
        names, starts, position = header.split(), [], 0
        for name in names:
            position = header.index(name, position)
            starts.append(position)
            position += len(name)
        ends = [*starts[1:], None]
        rows = [{name: line[start:end].strip() for name, start, end in zip(names, starts, ends, strict=True)}
                for line in lines]
        found[rows[0]["NAME"].split("/", 1)[0] if rows else ""] = (names, rows)
    return found


def _row(table: tuple[list[str], list[dict[str, str]]], name: str) -> dict[str, str]:
    return next(row for row in table[1] if row["NAME"].split("/", 1)[-1] == name)


def test_kubectl_shows_karpenters_columns_with_live_values(adze: AdzeCluster) -> None:
    plane = adze.plane
    adze.apply(adze.nodeclass())
    adze.apply(nodepool("general", weight=10))
    adze.apply(deployment("inflate", 3, cpu="500m"))
    adze.start_reconciler()

    pods_path = f"/api/v1/namespaces/{adze.namespace}/pods"
    wait_for(plane, pods_path, lambda pods: len(pods) == 3 and all(
        (p["spec"].get("nodeName") and is_ready(p)) for p in pods.values()),
        timeout=180, what="3 pods bound and Ready", describe=_describe_pods)
    claims = wait_for(plane, "/apis/karpenter.sh/v1/nodeclaims", lambda claims: claims if claims and all(
        is_ready(c) for c in claims.values()) else None, timeout=120, what="NodeClaims Ready")
    wait_for(plane, "/apis/karpenter.sh/v1/nodepools", lambda pools: any(
        (p.get("status") or {}).get("nodes") == len(claims) and is_ready(p) for p in pools.values()),
        timeout=60, what="NodePool status counts the nodes")
    wait_for(plane, "/apis/karpenter.k8s.aws/v1/ec2nodeclasses", lambda classes: any(
        is_ready(c) for c in classes.values()), timeout=60, what="EC2NodeClass Ready")

    plain = tables(plane.kubectl("get", "nodepools,nodeclaims,ec2nodeclasses").stdout)
    wide = tables(plane.kubectl("get", "nodepools,nodeclaims,ec2nodeclasses", "-o", "wide").stdout)
    assert plain["nodepool.karpenter.sh"][0] == NODEPOOL_COLUMNS
    assert plain["nodeclaim.karpenter.sh"][0] == NODECLAIM_COLUMNS
    assert plain["ec2nodeclass.karpenter.k8s.aws"][0] == NODECLASS_COLUMNS
    assert wide["nodepool.karpenter.sh"][0] == NODEPOOL_WIDE
    assert wide["nodeclaim.karpenter.sh"][0] == NODECLAIM_WIDE
    assert wide["ec2nodeclass.karpenter.k8s.aws"][0] == NODECLASS_WIDE

    pool = _row(wide["nodepool.karpenter.sh"], "general")
    assert (pool["NODECLASS"], pool["NODES"], pool["READY"], pool["WEIGHT"]) == (
        "default", str(len(claims)), "True", "10")
    assert pool["CPU"] and pool["MEMORY"]  # status.resources: what the pool's nodes hold

    instances = {i["InstanceId"]: i for i in _instances(adze)}
    joined = {j.provider_id: j.name for j in adze.nodes.joined}
    for claim in claims.values():
        name = claim["metadata"]["name"]
        row = _row(wide["nodeclaim.karpenter.sh"], name)
        provider_id = claim["status"]["providerID"]
        instance = instances[provider_id.rsplit("/", 1)[-1]]
        assert row["TYPE"] == instance["InstanceType"]
        assert row["CAPACITY"] == "on-demand"
        assert row["ZONE"] == instance["Placement"]["AvailabilityZone"]
        assert row["NODE"] == joined[provider_id]
        assert row["READY"] == "True"
        assert row["ID"] == provider_id
        assert row["IMAGEID"] == instance["ImageId"]
        assert (row["NODEPOOL"], row["NODECLASS"], row["DRIFTED"]) == ("general", "default", "")

    nodeclass = _row(wide["ec2nodeclass.karpenter.k8s.aws"], "default")
    assert (nodeclass["READY"], nodeclass["ROLE"]) == ("True", adze.aws.node_role)


def _instances(adze: AdzeCluster) -> list[dict[str, Any]]:
    reservations = adze.aws.client("ec2").describe_instances(
        Filters=[{"Name": f"tag:kubernetes.io/cluster/{adze.aws.cluster}", "Values": ["owned"]}])["Reservations"]
    return [i for r in reservations for i in r["Instances"]]


def _describe_pods(pods: Objects) -> str:
    return "; ".join(
        f"{key} node={p['spec'].get('nodeName')} phase={(p.get('status') or {}).get('phase')}"
        for key, p in sorted(pods.items())
    ) or "(no pods)"
