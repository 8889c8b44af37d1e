"""Disruption: which nodes to remove or replace to cut cost or follow NodePool changes, and why not others.

Pure decision code (no I/O, no clock reads). Entry points:

- ``controller.decide(state, instance_types_by_nodepool, settings, now, ...)`` -> ``DisruptionDecision``:
  at most one ``Command`` per pass (emptiness, drift, multi-node, single-node
  consolidation, in that order) plus an ``Explanation`` for every node left alone.
- ``validation.validate(command, fresh_state, ...)``: re-check after the validation wait.

One concern per module: ``candidates`` (eligibility), ``budgets``, ``pdb``,
``pods`` (do-not-disrupt, eviction cost), ``policy`` (consolidateAfter and
consolidation policy), ``drift`` (hashes and drift detection), ``simulation``
(the scheduler what-ifs), ``consolidation`` (delete/replace and price rules),
``emptiness``, ``drifting``, ``underutilized`` (multi/single-node), ``balanced``.
Drain and expiration helpers live in ``reconciler.lifecycle.drain`` / ``.expiration``.
"""
