"""Disruption: which nodes to remove or replace to cut cost or follow NodePool changes, and why not others.

Pure decision code (no I/O, no clock reads). Entry points:

- ``decide.decide(state, instance_types_by_nodepool, settings, now, ...)`` -> ``DisruptionDecision``:
  at most one ``Command`` per pass, from the first of ``methods.METHODS`` (emptiness, drift,
  multi-node, single-node consolidation) that finds one, plus an ``Explanation`` for every node left alone.
- ``validation.validate(command, fresh_state, ...)``: re-check after the validation wait, by the
  command's method (``methods.method_named(command.method).validated`` says whether to wait at all).

One concern per module: ``candidates`` (eligibility), ``budgets``, ``pdb``,
``pods`` (do-not-disrupt, eviction cost), ``policy`` (consolidateAfter and
consolidation policy), ``drift_detection`` (why a node drifted; the NodePool and EC2NodeClass hashes it compares are
``provisioning.drift_hashes``, stamped at creation), ``adoption`` (re-stamping another controller's claims),
``simulation`` (the scheduler what-ifs), ``consolidation`` (delete/replace and price rules),
``emptiness``, ``drift_method``, ``underutilized`` (multi/single-node), ``balanced``; ``methods`` (each method's
reason, class, compute and validation), ``pass_context`` (the inputs a pass shares among methods).
Drain and expiration helpers live in ``reconciler.lifecycle.drain`` / ``.expiration``.
"""
