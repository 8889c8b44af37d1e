"""Metrics, probes, JSON logs and the event recorder."""

from __future__ import annotations

import io
import json
import logging
import re
from datetime import UTC, datetime, timedelta

import aiohttp
from support.fake_apiserver import FakeApiServer

from reconciler.kube.api import EVENT
from reconciler.kube.live import LiveKube
from reconciler.kube.memory import MemoryKube
from reconciler.observability import (
    EventRecorder,
    HealthChecks,
    Metrics,
    ObservabilityServer,
    configure_logging,
    get_logger,
    log_decision,
)

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ip-10-0-0-1", "uid": "u-1"}}


async def test_metrics_and_probes_over_http() -> None:
    metrics = Metrics()
    metrics.nodeclaims_created.labels(reason="provisioned", nodepool="default", min_values_relaxed="false").inc()
    metrics.nodepool_usage.update("default", [({"nodepool": "default", "resource_type": "cpu"}, 4)])
    metrics.offering_price.update("m5.large/spot/us-east-1a", [
        ({"instance_type": "m5.large", "capacity_type": "spot", "zone": "us-east-1a"}, 0.035)])
    ready = {"synced": False}
    health = HealthChecks(
        liveness={"loop": lambda: True}, readiness={"cache-synced": lambda: ready["synced"]}
    )
    server = ObservabilityServer(metrics, health, metrics_port=0, health_port=0, host="127.0.0.1")
    await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            base_metrics = f"http://127.0.0.1:{server.metrics_port}"
            base_health = f"http://127.0.0.1:{server.health_port}"
            async with http.get(f"{base_metrics}/metrics") as response:
                text = await response.text()
                assert response.status == 200
                assert response.headers["Content-Type"].startswith("text/plain")
            assert ('karpenter_nodeclaims_created_total{min_values_relaxed="false",nodepool="default",'
                    'reason="provisioned"} 1.0') in text
            assert 'karpenter_nodepools_usage{nodepool="default",resource_type="cpu"} 4.0' in text
            assert "karpenter_cloudprovider_instance_type_offering_price_estimate{" in text
            assert "process_cpu_seconds_total" in text and "python_info{" in text
            series = [line for line in text.splitlines() if not line.startswith("#")]
            assert not [line for line in series if re.match(r"\w+_created[{ ]", line)], "no _created series"
            async with http.get(f"{base_health}/healthz") as response:
                assert response.status == 200
            async with http.get(f"{base_health}/readyz") as response:
                assert response.status == 500
                assert "cache-synced" in await response.text()
            ready["synced"] = True
            async with http.get(f"{base_health}/readyz") as response:
                assert response.status == 200
            async with http.get(f"{base_metrics}/healthz") as response:
                assert response.status == 404, "probes live on the health port only"
    finally:
        await server.stop()


def test_json_logs_carry_karpenter_keys_and_facts() -> None:
    stream = io.StringIO()
    configure_logging("info", stream)
    try:
        log_decision(
            get_logger("provisioner"),
            "computed new nodeclaim(s) to fit pod(s)",
            {"nodeclaims": 1},
            pods=5,
            at=datetime(2026, 1, 1, tzinfo=UTC),
        )
        logging.getLogger("reconciler.kube.reflector").warning("watch expired", extra={"kind": "Pod"})
        log_decision(
            logging.getLogger("reconciler.lifecycle"), "launched nodeclaim", name="default-x", zone="a"
        )
        get_logger("provisioner").debug("not shown at info")
    finally:
        logging.getLogger().handlers = []
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 3
    decision, warning, stdlib_decision = lines
    assert decision["message"] == "computed new nodeclaim(s) to fit pod(s)"
    assert decision["level"] == "INFO" and decision["controller"] == "provisioner"
    assert (decision["nodeclaims"], decision["pods"], decision["at"]) == (1, 5, "2026-01-01T00:00:00+00:00")
    assert decision["time"].endswith("Z")
    assert warning["level"] == "WARNING" and warning["kind"] == "Pod"
    assert warning["logger"] == "reconciler.kube.reflector"
    assert stdlib_decision["message"] == "launched nodeclaim"
    assert (stdlib_decision["fact_name"], stdlib_decision["zone"]) == ("default-x", "a")


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


async def test_event_recorder_aggregates_repeats_and_rate_limits() -> None:
    kube, clock = MemoryKube(), Clock()
    recorder = EventRecorder(kube, clock=clock, burst=3, refill_every=60, aggregation_window=600)
    await recorder.record(NODE, "Normal", "DisruptionBlocked", "pdb default/web prevents pod evictions")
    clock.now += timedelta(seconds=30)
    await recorder.record(NODE, "Normal", "DisruptionBlocked", "pdb default/web prevents pod evictions")
    events, _ = await kube.list(EVENT, "default")
    assert len(events) == 1
    assert events[0]["count"] == 2
    assert events[0]["lastTimestamp"] == "2026-01-01T00:00:30Z"
    assert events[0]["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "ip-10-0-0-1",
        "uid": "u-1",
    }
    for index in range(5):  # distinct messages: only the bucket's remaining 2 tokens get through
        await recorder.record(NODE, "Warning", "FailedDraining", f"attempt {index}")
    assert len((await kube.list(EVENT, "default"))[0]) == 3
    assert recorder.dropped == 3
    clock.now += timedelta(seconds=60)  # one token refilled
    await recorder.record(NODE, "Warning", "FailedDraining", "again")
    assert len((await kube.list(EVENT, "default"))[0]) == 4


async def test_event_recorder_output_is_schema_valid_over_http(server: FakeApiServer, live: LiveKube) -> None:
    recorder = EventRecorder(live, instance="karpenter-0")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "apps", "uid": "p"}}
    await recorder.record(pod, "Warning", "FailedScheduling", "x" * 2000)
    await recorder.record(pod, "Warning", "FailedScheduling", "x" * 2000)
    events, _ = await live.list(EVENT, "apps")
    assert len(events) == 1 and events[0]["count"] == 2 and len(events[0]["message"]) == 1024
    server.script("POST", "/events", 500)
    await recorder.record(pod, "Normal", "Nominated", "never raises")  # logged, not raised
