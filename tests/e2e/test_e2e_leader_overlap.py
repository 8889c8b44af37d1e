"""Two replicas, the leader's API server hangs: its last write and AWS call come before the standby's first.

Issue 16 (two leaders for ~14 s). Replicas ``a`` and ``b`` are the real ``App`` over HTTP (the fake API
server, which records every request it serves and when) and the real AWS provider against moto, each with
the AWS spot-price refresh running, as in production. For ``a`` the spot price history is slow and endless
(one page at a time, always one more), so a boto3 pagination is running in ``a``'s thread pool when its
leadership ends. Once ``a`` leads, its connection to the API server hangs (requests are never answered,
so its lease cannot be renewed). Every AWS request attempt of each replica is recorded as it is sent.

No overlap means: every write ``a`` got through and every AWS request ``a`` sent happened before the first
write or AWS request of ``b``, which starts with ``b`` taking the lease.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from botocore.awsrequest import AWSResponse
from ctrl_harness import wait_for
from e2e_rig import LEASE_NAME, e2e, e2e_lease
from support.timescale import scaled

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.provider import AWSCloudProvider
from reconciler.controllers.aws_provider.refresh_loops import HOUR, RefreshSchedule, aws_refresh_loops
from reconciler.controllers.operator.manager import BackgroundLoop
from reconciler.controllers.runtime.context import ControllerContext
from reconciler.kube.api import LEASE

PAGE = ("<DescribeSpotPriceHistoryResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r</requestId>"
        "<spotPriceHistorySet><item><instanceType>c5.large</instanceType><productDescription>Linux/UNIX"
        "</productDescription><spotPrice>0.03</spotPrice><timestamp>2026-01-01T00:00:00.000Z</timestamp>"
        "<availabilityZone>us-east-1a</availabilityZone></item></spotPriceHistorySet>"
        "<nextToken>{token}</nextToken></DescribeSpotPriceHistoryResponse>")


def spot_refresh(ctx: ControllerContext, cloud: AWSCloudProvider) -> dict[str, BackgroundLoop]:
    schedule = RefreshSchedule(spot_prices=0.3, instance_types=HOUR, launch_template_gc=HOUR, retry_initial=0.3)
    return {"pricing.spot": aws_refresh_loops(ctx, cloud, isolated_vpc=True, schedule=schedule)["pricing.spot"]}


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        yield self._data


@dataclass
class AwsRequests:
    """Every AWS request attempt a replica sends (botocore ``before-send``), with ``time.monotonic``."""

    sent: list[tuple[str, float, str]] = field(default_factory=list)
    endless: set[str] = field(default_factory=set)  # replicas whose spot price history never ends
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def watch(self, replica: str, cloud: AWSCloudProvider) -> None:
        clients = cloud.clients
        for client in clients._clients.values():
            self._hook(replica, client)
        create = clients.client

        def client_hooked(service: str) -> Any:
            known = service in clients._clients
            client = create(service)
            if not known:
                self._hook(replica, client)
            return client

        clients.client = client_hooked  # type: ignore[method-assign]

    def _hook(self, replica: str, client: Any) -> None:
        def sending(request: Any, event_name: str = "", **_: Any) -> AWSResponse | None:
            operation = event_name.rsplit(".", 1)[-1]
            with self._lock:
                self.sent.append((replica, time.monotonic(), operation))
            if replica in self.endless and operation == "DescribeSpotPriceHistory":
                time.sleep(0.3)  # a slow answer, and always one more page
                token = int((parse_qs(str(request.body or "")).get("NextToken") or ["0"])[0]) + 1
                return AWSResponse(request.url, 200, {}, _Body(PAGE.format(token=token).encode()))
            return None

        client.meta.events.register("before-send", sending)

    def of(self, replica: str, operation: str = "") -> list[float]:
        with self._lock:
            return [at for who, at, op in self.sent if who == replica and operation in ("", op)]


def holder(rig: Any) -> str:
    found = rig.server.kube.peek(LEASE, LEASE_NAME, "kube-system")
    return str(((found or {}).get("spec") or {}).get("holderIdentity") or "")


async def _true(value: object) -> bool:
    return bool(value)


async def test_a_leader_whose_api_server_hangs_stops_before_the_standby_starts(aws: OfflineAWS) -> None:
    async with e2e(aws, replicas=2) as rig:
        aws_requests = AwsRequests()
        a = rig.replica(lease=e2e_lease("a"), token="a", extra_loops=spot_refresh, seed=1)
        b = rig.replica(lease=e2e_lease("b"), token="b", extra_loops=spot_refresh, seed=2)
        aws_requests.watch("a", a.cloud)
        aws_requests.watch("b", b.cloud)
        aws_requests.endless.add("a")  # a's spot price refresh is one long pagination: always one more page
        rig.launch(a)
        assert await wait_for(lambda: _true(holder(rig) == "a"), timeout=90)
        refreshing = "DescribeSpotPriceHistory"
        assert await wait_for(lambda: _true(len(aws_requests.of("a", refreshing)) >= 2), timeout=90)
        rig.launch(b)
        assert await wait_for(lambda: _true(b.observed_holder() == "a"), timeout=90)  # b has tried the lease
        assert holder(rig) == "a" and aws_requests.of("b") == [], "b is a standby: it calls nothing"

        cut = time.monotonic()
        rig.server.stall(lambda request: request.headers.get("Authorization") == "Bearer a")
        assert await wait_for(lambda: _true(holder(rig) == "b"), timeout=120), "b takes over the expired lease"
        assert await wait_for(lambda: _true(a.task is not None and a.task.done()), timeout=60)
        await asyncio.sleep(scaled(3.0))  # b leads; anything a's threads still sent would be recorded by now
        assert a.task is not None and a.task.result() == 1, "a lost its leadership and exited with 1"

        writes = [r for r in rig.server.requests if r.writes]
        a_events = [r.at for r in writes if r.authorization == "Bearer a"] + aws_requests.of("a")
        b_events = [r.at for r in writes if r.authorization == "Bearer b"] + aws_requests.of("b")
        assert b_events, "b wrote (its lease first) and called AWS once leading"
        assert [at for at in aws_requests.of("a", refreshing) if at > cut], "a's pagination runs after the cut"
        overlap = sorted(at - min(b_events) for at in a_events if at >= min(b_events))
        assert max(a_events) < min(b_events), f"a acted after b's first action, by {overlap} s"
