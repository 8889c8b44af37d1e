"""``plan``: what a NodePool change would do to a cluster, computed by running the real engine in the simulator.

- ``compute``: the three simulations (current, proposed until stable, fresh provision) and ``PlanResult``;
- ``proposal``: the proposed NodePools and EC2NodeClasses applied to the snapshot's objects (pure);
- ``stability``: provision + disrupt until nothing changes, jumping the virtual clock, tracking blockers;
- ``timeline``: when each disruption command would really run (budgets pace them, drains take time);
- ``impact``: pods evicted per workload and the PDBs that pace them;
- ``risks``: the verdict, the risks in plain words and the headline figures;
- ``render`` (text, Markdown) and ``html`` (``--report``) present them.
"""
