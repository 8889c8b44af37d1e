"""The live reconciler: controllers over the ``KubeAPI`` port and a ``CloudProvider``, and the process around them.

- ``app``: ``python -m reconciler run`` (settings from the environment, Lease
  leader election, health and metrics endpoints, graceful shutdown).
- ``manager.Reconciler``: one leader's controllers, fed by reflectors through
  ``reconciler.state.store.StateStore`` (the live ``ClusterState``).
- Controllers, one concern each: ``provisioner`` (batch pending pods, plan,
  create NodeClaims, nominate), ``lifecycle`` (launch, register, initialize,
  timeouts), ``termination`` (drain and delete behind the finalizer),
  ``disruption`` (decide, validate, execute one command at a time), ``drift``
  (provider drift as a condition), ``expiration``, ``garbage`` (orphaned
  instances, vanished instances), ``status`` (NodePool / EC2NodeClass),
  ``nodeclass_termination`` (the EC2NodeClass finalizer: launch templates and instance profiles),
  ``podevents`` (``lastPodEventTime``), ``interruption`` (SQS queue and
  instance-status poller), ``consolidatable`` (the Consolidatable condition),
  ``hashes`` (drift-hash stamps; re-stamping adopted NodeClaims),
  ``registration_health`` (NodePool NodeRegistrationHealthy), ``state_metrics``
  (node, pod, offering, cost and status-condition metrics from the cache).
- ``metered``: the cloud provider and the Kubernetes client as Karpenter measures
  them (cloud-provider and client-go request metrics).

Decisions come from the pure engine (``provisioning``, ``disruption``,
``lifecycle.expiration``); actions go through the shared executors in
``reconciler.lifecycle``. Everything here is restartable: the state is in the
API server and the cloud, so a replacement leader converges from there.
"""
