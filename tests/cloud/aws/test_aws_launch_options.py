"""Every EC2NodeClass launch option Adze implements reaches EC2: the launch template's data and the fleet.

The support registry (``reconciler.api.support``) names this test as the proof for these fields."""

from __future__ import annotations

import base64
from typing import Any

from aws_harness import Recorder

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.types import LaunchRequest

EBS = {"deleteOnTermination": False, "encrypted": True, "iops": 4000, "kmsKeyID": "arn:aws:kms:us-east-1:1:key/k",
       "snapshotID": "snap-0123456789abcdef0", "throughput": 250, "volumeInitializationRate": 200,
       "volumeSize": "50Gi", "volumeType": "gp3"}


async def test_launch_template_and_fleet_carry_the_nodeclass_launch_options(aws: OfflineAWS, provider: Any) -> None:
    recorder = Recorder().attach(provider, services=("ec2",))
    nodeclass = aws.nodeclass(
        associatePublicIPAddress=True,
        detailedMonitoring=True,
        blockDeviceMappings=[{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": EBS}],
        metadataOptions={"httpEndpoint": "enabled", "httpProtocolIPv6": "enabled", "httpPutResponseHopLimit": 2,
                         "httpTokens": "optional"},
        tags={"team": "storage"},
        userData="#!/bin/bash\necho before-nodeadm\n",
        context="c-0123456789abcdef0",
    )
    await provider.create(LaunchRequest(nodeclaim="nc-1", nodepool="default", nodeclass="default",
                                        instance_types=["m5.large"]), nodeclass)
    # the dry-run validation (validation.py) also sends CreateLaunchTemplate; the real one is not a dry run
    template = recorder.fleet_template()
    (fleet,) = recorder.of("CreateFleet")
    data = template["LaunchTemplateData"]
    assert data["Monitoring"] == {"Enabled": True}
    assert data["NetworkInterfaces"][0]["AssociatePublicIpAddress"] is True
    assert data["MetadataOptions"] | {"HttpProtocolIpv6": "enabled", "HttpPutResponseHopLimit": 2,
                                      "HttpTokens": "optional", "HttpEndpoint": "enabled"} == data["MetadataOptions"]
    assert data["BlockDeviceMappings"] == [{"DeviceName": "/dev/xvda", "Ebs": {
        "DeleteOnTermination": False, "Encrypted": True, "Iops": 4000, "KmsKeyId": EBS["kmsKeyID"],
        "SnapshotId": EBS["snapshotID"], "Throughput": 250, "VolumeInitializationRate": 200, "VolumeSize": 50,
        "VolumeType": "gp3"}}]
    user_data = base64.b64decode(data["UserData"]).decode()
    assert "echo before-nodeadm" in user_data and user_data.index("before-nodeadm") < user_data.index("NodeConfig")
    assert fleet["Context"] == "c-0123456789abcdef0"
    instance_tags = next(spec["Tags"] for spec in fleet["TagSpecifications"] if spec["ResourceType"] == "instance")
    assert {"Key": "team", "Value": "storage"} in instance_tags
