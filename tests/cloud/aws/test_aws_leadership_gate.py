"""No AWS request starts once leadership may be lost, not even from a boto3 call already running (issue 16).

A call in the AWS thread pool outlives the cancelled coroutine that awaited it: botocore goes on with its
retries and paginator pages. The provider's ``guard`` asks the leadership gate before every call and every
HTTP attempt. Here a real botocore EC2 client talks to a slow local endpoint that counts the requests it
gets; the gate closes part-way through a long pagination and through a run of retries.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest
from support.timescale import scaled

from reconciler.cloud.aws.clients import AwsCaller, AwsClients, ClientOptions
from reconciler.kube.leadership import LeadershipGate, NotLeading

PAGE = """<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
<requestId>r-{n}</requestId><spotPriceHistorySet><item><instanceType>m5.large</instanceType>
<productDescription>Linux/UNIX</productDescription><spotPrice>0.05</spotPrice>
<timestamp>2026-01-01T00:00:00.000Z</timestamp><availabilityZone>us-east-1a</availabilityZone></item>
</spotPriceHistorySet>{token}</DescribeSpotPriceHistoryResponse>"""
UNAVAILABLE = ("<Response><Errors><Error><Code>Unavailable</Code><Message>try later</Message></Error></Errors>"
               "<RequestID>r</RequestID></Response>")


@dataclass
class SlowEC2:
    """DescribeSpotPriceHistory in ``pages`` pages (or always 503), ``delay`` seconds per request."""

    pages: int = 40
    unavailable: bool = False
    delay: float = 0.05
    requests: list[str] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    close_after: int = 3  # set ``arrived`` once this many requests came in

    def handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                token = body.get("NextToken", ["0"])[0]
                stub.requests.append(token)
                if len(stub.requests) >= stub.close_after:
                    stub.arrived.set()
                threading.Event().wait(stub.delay)
                if stub.unavailable:
                    status, text = 503, UNAVAILABLE
                else:
                    n = int(token) + 1
                    status = 200
                    text = PAGE.format(n=n, token=f"<nextToken>{n}</nextToken>" if n < stub.pages else "")
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return

        return Handler


@pytest.fixture
def endpoint() -> Iterator[tuple[SlowEC2, str]]:
    stub = SlowEC2()
    server = ThreadingHTTPServer(("127.0.0.1", 0), stub.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield stub, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def guarded(url: str) -> tuple[AwsClients, AwsCaller, LeadershipGate]:
    clients = AwsClients(ClientOptions(region="us-east-1", endpoint_url=url, retry_mode="standard",
                                       max_attempts=6, access_key_id="testing", secret_access_key="testing"))
    caller = AwsCaller(2)
    gate = LeadershipGate(time.monotonic)
    gate.renewed(time.monotonic(), renew_deadline=3600)
    clients.gate = caller.gate = gate.check
    return clients, caller, gate


async def closes_when_requests_arrive(stub: SlowEC2, gate: LeadershipGate) -> int:
    """Leadership is lost once the endpoint has seen ``close_after`` requests; returns how many it had."""
    await asyncio.to_thread(stub.arrived.wait, 10)
    gate.close()
    return len(stub.requests)


async def test_no_page_of_a_running_pagination_is_requested_after_leadership_is_lost(
    endpoint: tuple[SlowEC2, str],
) -> None:
    stub, url = endpoint
    clients, caller, gate = guarded(url)
    paging = asyncio.create_task(caller.paginate(clients.ec2, "describe_spot_price_history", "SpotPriceHistory"))
    seen_at_close = await closes_when_requests_arrive(stub, gate)
    with pytest.raises(NotLeading):
        await paging
    await asyncio.sleep(scaled(0.3))  # anything still going would show up now
    assert len(stub.requests) <= seen_at_close + 1, "at most the page already on the wire"
    assert len(stub.requests) < stub.pages
    caller.close()


async def test_no_retry_is_sent_after_leadership_is_lost(endpoint: tuple[SlowEC2, str]) -> None:
    stub, url = endpoint
    stub.unavailable, stub.close_after = True, 2
    clients, caller, gate = guarded(url)
    calling = asyncio.create_task(caller.call(clients.ec2.describe_spot_price_history))
    seen_at_close = await closes_when_requests_arrive(stub, gate)
    with pytest.raises(NotLeading):
        await calling
    await asyncio.sleep(scaled(0.3))
    assert len(stub.requests) <= seen_at_close + 1 < 6
    caller.close()


async def test_a_call_is_not_started_at_all_past_the_renew_deadline(endpoint: tuple[SlowEC2, str]) -> None:
    stub, url = endpoint
    clients, caller, gate = guarded(url)
    gate.renewed(time.monotonic() - 3600, renew_deadline=10)  # the deadline passed long ago
    with pytest.raises(NotLeading):
        await caller.call(clients.ec2.describe_spot_price_history)
    with pytest.raises(NotLeading):  # nor directly on the client, in whatever thread
        await asyncio.to_thread(clients.ec2.describe_spot_price_history)
    assert stub.requests == []
    caller.close()
