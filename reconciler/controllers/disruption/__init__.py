"""Controllers of voluntary disruption: the ``disruption_controller`` (one command at a time, decided by the pure
``reconciler.disruption``) and the NodeClaim conditions it reads or publishes (``drift_condition``: provider
drift; ``consolidatable_condition``: ``Consolidatable``)."""
