"""The AWS provider's own leader loops (Karpenter AWS's ``controllers/``): ``refresh_loops`` (prices, instance
types, launch-template and instance-profile garbage collection), ``capacity_reservation_controller`` and
``interruption_controller`` (SQS queue and instance-status poller)."""
