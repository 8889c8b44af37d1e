"""A spot interruption warning on the SQS queue: the NodeClaim goes, its pods get a new node (moto SQS)."""

from __future__ import annotations

from ctrl_harness import wait_for
from e2e_rig import e2e
from support.interruption_events import spot_warning

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.kube.api import EVENT, NODECLAIM, POD


async def test_interrupted_node_is_replaced_and_its_instance_terminated(aws: OfflineAWS) -> None:
    sqs = aws.client("sqs")
    queue = f"{aws.cluster}-interruption"
    url = sqs.create_queue(QueueName=queue)["QueueUrl"]
    async with e2e(aws, replicas=3) as rig:
        rig.launch(rig.replica(interruption_queue=queue))
        assert await wait_for(lambda: rig.converged(instances=1), timeout=120), await rig.inventory()
        claim = rig.server.kube.objects(NODECLAIM)[0]
        instance_id = claim["status"]["providerID"].rsplit("/", 1)[1]
        logged_before = len(rig.log_lines())
        sqs.send_message(QueueUrl=url, MessageBody=spot_warning(instance_id))

        async def replaced() -> bool:
            names = {c["metadata"]["name"] for c in rig.server.kube.objects(NODECLAIM)}
            return claim["metadata"]["name"] not in names and await rig.converged(instances=1)

        assert await wait_for(replaced, timeout=120), await rig.inventory()
        # One replacement sized for all three pods (the drain waits for the pass that plans it). How many
        # NodeClaims the first scale-up took depends on how the pods' events batched, so it is not counted.
        replacements = [line for line in rig.log_lines()[logged_before:] if line["message"] == "created nodeclaim"]
        assert len(replacements) == 1, replacements
        assert replacements[0]["pods"] == 3
        states = {i["InstanceId"]: i["State"]["Name"] for i in rig.ec2_instances()}
        assert states[instance_id] in ("shutting-down", "terminated")
        assert all(p["spec"].get("nodeName") for p in rig.server.kube.objects(POD))
        assert any(e["reason"] == "SpotInterrupted" for e in rig.server.kube.objects(EVENT))
        assert int(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
                   ["Attributes"]["ApproximateNumberOfMessages"]) == 0
