"""Controllers that create NodeClaims (Karpenter's ``controllers/provisioning`` and ``static``): the
``provisioning_controller`` (pending pods -> planned NodeClaims, over the pure ``reconciler.provisioning``) and
``static_capacity`` (static NodePools' replicas)."""
