"""EventBridge-shaped EC2 messages as they arrive on Karpenter's interruption queue (aws.md, interruption events)."""

from __future__ import annotations

import json
from datetime import UTC, datetime


def spot_warning(instance_id: str, region: str = "us-east-1", account: str = "123456789012") -> str:
    """An "EC2 Spot Instance Interruption Warning" for ``instance_id`` (two minutes' notice)."""
    return json.dumps({
        "version": "0",
        "id": f"e-spot-{instance_id}",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": account,
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [f"arn:aws:ec2:{region}:{account}:instance/{instance_id}"],
        "detail": {"instance-id": instance_id, "instance-action": "terminate"},
    })
