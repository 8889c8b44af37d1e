"""Metrics Karpenter exports, kept from the cluster-state cache and the clients: ``state_metrics`` (nodes,
offerings, cost; drives ``pod_metrics`` and ``condition_metrics``) and ``metered_clients`` (cloud-provider and
client-go request metrics)."""
