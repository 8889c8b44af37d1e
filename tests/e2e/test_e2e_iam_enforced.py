"""``python -m reconciler run`` with the stack's generated controller policies enforced on every AWS call.

The process is the real one (environment, kubeconfig, start-up check, eks:DescribeCluster discovery, leader
election, every controller, the interruption queue on a KMS-encrypted queue) against the dev cluster of
``dev_cluster.py`` (fake API server + moto), started through ``enforced_reconciler.py``, which authorizes each
call with ``support.aws_authz`` before it is sent. It must start, provision for pending pods, consolidate after a
scale-down and stop cleanly, with no call denied.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from ctrl_cluster import inventory, packed
from ctrl_harness import wait_for
from dev_cluster import start_dev_cluster
from support.controller_iam import generated_policies
from support.timescale import scaled

from reconciler.kube.api import DEPLOYMENT, POD

REPO = Path(__file__).resolve().parents[2]
WRAPPER = Path(__file__).resolve().parent / "enforced_reconciler.py"
# What a provisioning and consolidating run must have called (and had authorized).
EXPECTED_CALLS = {
    "eks:DescribeCluster", "ec2:DescribeInstanceTypes", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups", "ec2:DescribeImages", "ssm:GetParameter", "iam:GetInstanceProfile",
    "iam:CreateInstanceProfile", "iam:AddRoleToInstanceProfile", "ec2:DescribeLaunchTemplates",
    "ec2:CreateLaunchTemplate", "ec2:CreateFleet", "ec2:DescribeInstances", "ec2:TerminateInstances",
    "sqs:GetQueueUrl", "sqs:ReceiveMessage", "ec2:DescribeInstanceStatus", "ec2:DescribeSpotPriceHistory",
}


async def _collect(stream: asyncio.StreamReader, lines: list[dict[str, Any]], raw: list[str]) -> None:
    while True:
        line = await stream.readline()
        if not line:
            return
        text = line.decode().strip()
        raw.append(text)
        if text.startswith("{"):
            lines.append(json.loads(text))


async def test_run_with_the_generated_policies_enforced_starts_provisions_and_consolidates(tmp_path: Path) -> None:
    dev = await start_dev_cluster(tmp_path, replicas=6, cluster="adze-iam")
    queue = "adze-iam-interruption"
    key = dev.aws.client("kms").create_key(Description="interruption queue")["KeyMetadata"]
    dev.aws.client("sqs").create_queue(QueueName=queue, Attributes={"KmsMasterKeyId": key["KeyId"]})
    policies = tmp_path / "policies.json"
    policies.write_text(json.dumps(generated_policies(dev.aws, queue=queue, kms_key_arn=key["Arn"])))
    report = tmp_path / "authz.json"
    env = {**os.environ, **dev.env(metrics_port=0, health_port=0), "PYTHONPATH": str(REPO),
           "INTERRUPTION_QUEUE": queue, "BATCH_IDLE_DURATION": "200ms", "BATCH_MAX_DURATION": "1s",
           "ADZE_AUTHZ_POLICIES": str(policies), "ADZE_AUTHZ_REPORT": str(report)}
    process = await asyncio.create_subprocess_exec(sys.executable, str(WRAPPER), cwd=REPO, env=env,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    lines: list[dict[str, Any]] = []
    raw: list[str] = []
    assert process.stdout is not None
    reader = asyncio.create_task(_collect(process.stdout, lines, raw))
    kube = dev.server.kube
    try:
        async def provisioned() -> bool:
            inv = await inventory(kube, dev.observer)
            return inv.converged and bool(inv.instances) and not inv.pending_pods

        assert await wait_for(provisioned, timeout=360), (await inventory(kube, dev.observer), raw[-20:])
        launched = {i.provider_id for i in await dev.observer.list()}
        await kube.patch(DEPLOYMENT, "inflate", {"spec": {"replicas": 1}}, "default")
        # One 1.5-CPU pod left: a single c5.large (0.085 $/h) holds it, whatever the first nodes were.
        assert await wait_for(lambda: packed(kube, dev.observer, 1, 0.09), timeout=540), \
            (await inventory(kube, dev.observer), raw[-20:])
        assert {i.provider_id for i in await dev.observer.list()} != launched
        assert all(p["spec"].get("nodeName") for p in kube.objects(POD))
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), timeout=scaled(90)) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await asyncio.gather(reader, return_exceptions=True)
        await dev.stop()

    authorized = json.loads(report.read_text())
    assert authorized["denials"] == [], authorized["denials"]
    assert EXPECTED_CALLS - set(authorized["operations"]) == set()
    messages = [line["message"] for line in lines]
    assert "launched nodeclaim" in messages and any(m.startswith("disrupting nodeclaim") for m in messages)
    assert not dev.server.violations, dev.server.violations
