"""Karpenter v1 API: NodePool, NodeClaim (karpenter.sh/v1) and EC2NodeClass (karpenter.k8s.aws/v1)."""

from .ec2nodeclass import EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus
from .errors import Problem, ValidationFailure, format_validation_error
from .nodeclaim import NodeClaim, NodeClaimSpec, NodeClaimStatus
from .nodepool import Budget, Disruption, NodePool, NodePoolSpec, NodePoolStatus
from .objects import KarpenterObject, is_karpenter_manifest, parse_object
from .requirements import NodeClassReference, NodeSelectorRequirementWithMinValues, Taint

__all__ = [
    "Budget",
    "Disruption",
    "EC2NodeClass",
    "EC2NodeClassSpec",
    "EC2NodeClassStatus",
    "KarpenterObject",
    "NodeClaim",
    "NodeClaimSpec",
    "NodeClaimStatus",
    "NodeClassReference",
    "NodePool",
    "NodePoolSpec",
    "NodePoolStatus",
    "NodeSelectorRequirementWithMinValues",
    "Problem",
    "Taint",
    "ValidationFailure",
    "format_validation_error",
    "is_karpenter_manifest",
    "parse_object",
]
