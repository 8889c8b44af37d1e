"""Beyond Karpenter: offline previews and explanations over a cluster snapshot.

- ``snapshot``: capture what the engine needs from a cluster (live or ``kubectl get -o yaml``) as a
  scenario document, with Secrets, ConfigMaps, env values and managedFields stripped.
- ``plan``: what a NodePool change would do (drift, consolidation, cost, stranded pods), computed by
  running the real engine in the simulator from the snapshot.
- ``explain``: why a pod is pending / why a node is or is not disrupted, from the engine's own reasons.
- ``status``: an eks-node-viewer-style terminal view; ``html``: a self-contained visual report.

Everything here composes public pieces (the simulator, ``ClusterState``, the provisioning and
disruption entry points); nothing in the engine knows about it.
"""
