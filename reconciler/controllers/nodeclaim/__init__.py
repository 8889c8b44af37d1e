"""Controllers of a NodeClaim's life (Karpenter's ``nodeclaim/`` and ``node/``): ``lifecycle_controller``
(launch, register, initialize), ``termination_controller`` (the drain-and-delete finalizer, reading through
``termination_cache_reads``), ``expiration_controller``, ``node_repair_controller``, ``garbage_collection``
(instances vs NodeClaims) and ``pod_events_controller`` (``lastPodEventTime``)."""
