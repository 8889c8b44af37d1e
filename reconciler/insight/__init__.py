"""Beyond Karpenter: offline previews and explanations over a cluster snapshot.

- ``snapshot``: capture what the engine needs from a cluster (live through ``KubeAPI``, or a
  ``kubectl get -o yaml`` dump) as a scenario document, without Secrets, ConfigMaps, env values or
  managedFields; ``sources`` reads snapshots and proposed NodePools (YAML or a Pulumi stack file).
- ``plan/`` (a subpackage: ``compute``, ``proposal``, ``stability``, ``timeline``, ``impact``, ``risks``,
  ``render``, ``html``): what a NodePool change would do — drift, consolidation, cost, stranded pods,
  blockers, evictions per workload — by running the real engine in the simulator, each disruption command
  timed as the live controller would run it.
- ``explain``: why a pod is pending / why a node is or is not disrupted, from the engine's own reasons.
- ``status`` (+ ``watch``): an eks-node-viewer-style terminal view, redrawn live with ``--watch``; ``html`` +
  ``charts``: a self-contained report over the ``frames`` a ``RecordingSimulation`` captures after every step.
- ``money``: the one money format every output uses; ``progress``: progress on a terminal's stderr.
- ``catalog``: the instance types a preview prices with (bundled preset, or EC2 with ``--catalog live``).
- ``commands``: the CLI adapters (files, cluster, AWS, wall clock); everything else is pure or drives
  the simulator.

Everything here composes public pieces (the simulator, ``ClusterState``, the provisioning and
disruption entry points); nothing in the engine knows about it.
"""
