"""The live reconciler: controllers over the ``KubeAPI`` port and a ``CloudProvider``, and the process around them.

Grouped by concern, as Karpenter groups ``pkg/controllers``:

- ``operator/``: the process. ``app`` is ``python -m reconciler run`` (settings from the environment, Lease
  leader election, health and metrics endpoints, graceful shutdown); ``manager.Reconciler`` runs one leader's
  controllers, fed by reflectors through ``reconciler.state.store.StateStore`` (the live ``ClusterState``);
  ``cloud_from_settings`` builds the ``CloudProvider``.
- ``runtime/``: what every controller shares (``context``: clock, timings, wake-ups, locks,
  ``ControllerContext``; ``backoff``, ``workers``, ``periodic``).
- ``provisioning/``: ``provisioning_controller`` (batch pending pods, plan, create NodeClaims, nominate) and
  ``static_capacity`` (static NodePools).
- ``disruption/``: ``disruption_controller`` (decide, validate, execute one command at a time),
  ``drift_condition`` (provider drift as a condition), ``consolidatable_condition``.
- ``nodeclaim/``: ``lifecycle_controller`` (launch, register, initialize, timeouts), ``termination_controller``
  (drain and delete behind the finalizer; ``termination_cache_reads``), ``expiration_controller``,
  ``node_repair_controller`` (NodeRepair), ``garbage_collection`` (orphaned and vanished instances),
  ``pod_events_controller`` (``lastPodEventTime``).
- ``pools_and_classes/``: ``status_controller`` (NodePool / EC2NodeClass status), ``hash_stamper`` (drift-hash
  stamps; re-stamping adopted NodeClaims), ``registration_health`` (NodePool NodeRegistrationHealthy),
  ``field_support`` (FieldsSupported), ``nodeoverlay_status``, ``nodeclass_termination`` (the EC2NodeClass
  finalizer: launch templates and instance profiles).
- ``aws_provider/``: the AWS provider's loops: ``refresh_loops`` (prices, instance types, launch-template and
  profile GC), ``capacity_reservation_controller``, ``interruption_controller`` (SQS queue and instance-status
  poller).
- ``exporters/``: metrics from the cache (``state_metrics``, ``pod_metrics``, ``condition_metrics``) and the
  cloud provider and Kubernetes client as Karpenter measures them (``metered_clients``).

Decisions come from the pure engine (``provisioning``, ``disruption``, ``lifecycle.expiration``); actions go
through the shared executors in ``reconciler.lifecycle``. Everything here is restartable: the state is in the
API server and the cloud, so a replacement leader converges from there.
"""
