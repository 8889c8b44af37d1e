"""The live reconciler process (Karpenter's ``operator``): ``app`` (``python -m reconciler run``),
``manager.Reconciler`` (one leader's controllers) and ``cloud_from_settings`` (the ``CloudProvider`` to run)."""
