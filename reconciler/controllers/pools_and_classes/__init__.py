"""Controllers of the objects users write — NodePools, EC2NodeClasses, NodeOverlays: ``status_controller``
(readiness, resources, usage), ``hash_stamper`` (drift hashes), ``registration_health``, ``field_support``
(``FieldsSupported``), ``nodeoverlay_status`` and ``nodeclass_termination`` (the EC2NodeClass finalizer)."""
