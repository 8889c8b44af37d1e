"""The reconciler as a process, the way it is started by hand: env vars + kubeconfig, AWS via moto.

``python -m reconciler.controllers.operator.app`` (what ``python -m reconciler run``
calls) runs in a subprocess against the dev cluster of ``dev_cluster.py`` and
must print the workshop log sequence as JSON lines with the same facts, then
stop on SIGTERM with exit code 0 and a released lease.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from dev_cluster import start_dev_cluster
from support.timescale import scaled

from reconciler.controllers.operator.app import DEFAULT_LEASE_NAME
from reconciler.kube.api import LEASE, NODECLAIM

SEQUENCE = [
    "found provisionable pod(s)",
    "computed new nodeclaim(s) to fit pod(s)",
    "created nodeclaim",
    "launched nodeclaim",
    "registered nodeclaim",
    "initialized nodeclaim",
]
REPO = Path(__file__).resolve().parents[2]


async def _read_until(stream: asyncio.StreamReader, lines: list[dict[str, Any]], done: str, timeout: float) -> None:
    async def read() -> None:
        while True:
            raw = await stream.readline()
            if not raw:
                raise AssertionError(f"the process ended before logging {done!r}")
            text = raw.decode().strip()
            if text.startswith("{"):
                lines.append(json.loads(text))
                if lines[-1]["message"] == done:
                    return

    await asyncio.wait_for(read(), timeout)


async def test_run_process_shows_the_workshop_log_sequence_and_stops_cleanly(tmp_path: Path) -> None:
    dev = await start_dev_cluster(tmp_path, replicas=3, cluster="adze-process")
    env = {**os.environ, **dev.env(metrics_port=0, health_port=0), "PYTHONPATH": str(REPO)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "reconciler.controllers.operator.app", cwd=REPO, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    lines: list[dict[str, Any]] = []
    try:
        assert process.stdout is not None
        await _read_until(process.stdout, lines, "initialized nodeclaim", timeout=scaled(180))
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), timeout=scaled(60)) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await dev.stop()
    messages = [line["message"] for line in lines]
    positions = [messages.index(step) for step in SEQUENCE]
    assert positions == sorted(positions), messages
    facts = {line["message"]: line for line in lines}
    claim = dev.server.kube.objects(NODECLAIM)[0]
    assert facts["found provisionable pod(s)"]["pods"] == 3
    assert facts["created nodeclaim"]["NodeClaim"] == {"name": claim["metadata"]["name"]}
    launched = facts["launched nodeclaim"]
    assert launched["provider-id"] == claim["status"]["providerID"]
    assert launched["instance-type"] == claim["metadata"]["labels"]["node.kubernetes.io/instance-type"]
    assert launched["zone"] == claim["metadata"]["labels"]["topology.kubernetes.io/zone"]
    assert launched["capacity-type"] == "on-demand"
    assert facts["registered nodeclaim"]["Node"] == {"name": claim["status"]["nodeName"]}
    controller_lines = [line for line in lines if line.get("controller") not in (None, "app")]
    assert controller_lines and all(line.get("cluster") == "adze-process" for line in controller_lines)
    lease = dev.server.kube.peek(LEASE, DEFAULT_LEASE_NAME, "kube-system")  # Karpenter's, the default
    assert lease is not None and not lease["spec"].get("holderIdentity")
    assert not dev.server.violations, dev.server.violations
