"""Adze's reconciler: Karpenter-compatible provisioning and disruption for Amazon EKS."""

__version__ = "0.1.0"
