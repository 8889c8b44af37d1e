"""Cluster state, as Karpenter's ``controllers/state``: what the decision code reads of the cluster.

- ``cluster``: ``ClusterState``, the nodes, claims, pods, pools and classes, with per-node versions and a
  change journal (pure; the simulator and the live controller fill it the same way).
- ``node``: ``StateNode``, one node's view (its claim, its pods, what is free on it).
- ``views``: per-node views kept up to date from the journal instead of rebuilt from every node.
- ``pods``: the pods of nodes marked for deletion that need a new home.
- ``store``: ``StateStore``, the live controller's store fed by watch events.
"""
