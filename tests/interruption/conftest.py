"""Fixtures for the interruption tests: an in-process moto server (SQS, EventBridge) per session."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

REGION = "us-east-1"
_queues = itertools.count(1)


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def sqs(moto_url: str) -> Any:
    return boto3.client(
        "sqs",
        region_name=REGION,
        endpoint_url=moto_url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.fixture
def queue(sqs: Any) -> tuple[str, str]:
    """A fresh queue: (name, url)."""
    name = f"interruption-{next(_queues)}"
    url = sqs.create_queue(QueueName=name, Attributes={"MessageRetentionPeriod": "300"})["QueueUrl"]
    return name, url
