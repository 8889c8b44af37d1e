"""Provisioning: the batch window and the provisioner's plan (pending pods -> NodeClaims to create)."""
