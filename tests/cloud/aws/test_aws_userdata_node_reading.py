"""The kubelet stand-in of the real-control-plane tests (``support.node_bootstrap``) reads the user data the
reconciler writes the way a node's bootstrap does: labels, taints (startup and ``karpenter.sh/unregistered``
included) and kubelet settings, for AL2023, AL2 and Bottlerocket, with the user's own data merged in."""

from __future__ import annotations

import pytest
from support.node_bootstrap import BootstrapError, read_user_data

from reconciler.api.amifamily import AL2, AL2023, BOTTLEROCKET, AMIFamily
from reconciler.cloud.aws.userdata import BootstrapOptions, ClusterInfo, render

CLUSTER = ClusterInfo("demo", "https://example.eks.amazonaws.com", "Q0E=", dns_ip="10.96.0.10")
LABELS = {"karpenter.sh/nodepool": "general", "team": "payments", "node.kubernetes.io/instance-type": "m5.large",
          "kubernetes.io/not-allowed": "x"}
TAINTS = [{"key": "dedicated", "value": "payments", "effect": "NoSchedule"},
          {"key": "example.com/agent-not-ready", "effect": "NoExecute"}]
UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}


@pytest.mark.parametrize("family", [AL2023, AL2, BOTTLEROCKET], ids=lambda f: f.name)
def test_labels_taints_and_max_pods_come_back(family: AMIFamily) -> None:
    text = render(family, CLUSTER, BootstrapOptions(labels=LABELS, taints=TAINTS, max_pods=58))
    registration = read_user_data(text)
    assert registration.family == family.name
    # kubelet-settable labels only: the restricted kubernetes.io one never reaches the node
    assert registration.labels == {k: v for k, v in LABELS.items() if k != "kubernetes.io/not-allowed"}
    assert sorted(registration.taints, key=str) == sorted([*TAINTS, UNREGISTERED], key=str)
    assert registration.config["maxPods"] == 58


def test_al2023_merges_the_users_nodeconfig_before_adzes() -> None:
    custom = (
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n"
        "      kubeReserved: {cpu: 300m}\n      maxPods: 20\n"
    )
    text = render(AL2023, CLUSTER, BootstrapOptions(labels={"a": "b"}, custom=custom, max_pods=40))
    registration = read_user_data(text)
    assert registration.config["kubeReserved"] == {"cpu": "300m"}
    assert registration.config["maxPods"] == 40  # Adze's part comes last and wins, as nodeadm merges
    assert registration.labels == {"a": "b"}


def test_unreadable_user_data_is_named() -> None:
    with pytest.raises(BootstrapError, match="neither MIME"):
        read_user_data("#!/bin/bash\necho hello\n")
    with pytest.raises(BootstrapError, match="is not key"):
        read_user_data(render(AL2023, CLUSTER, BootstrapOptions(labels={"a": "b"})).replace("a=b", "ab"))
