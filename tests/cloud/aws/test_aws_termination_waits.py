"""Termination against moto: an instance EC2 keeps in ``shutting-down`` holds its NodeClaim's finalizer until
DescribeInstances reports it terminated."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_harness import Recorder
from moto.ec2.models.instances import Instance as MotoInstance

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.types import LaunchRequest
from reconciler.kube.api import NODECLAIM, NotFoundError
from reconciler.kube.memory import MemoryKube
from reconciler.lifecycle.termination import Terminator
from reconciler.model import labels as wk

NOW = datetime(2026, 2, 1, 8, tzinfo=UTC)


@pytest.fixture
def slow_shutdown(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """moto answers TerminateInstances and goes to ``terminated`` at once; EC2 spends a while in
    ``shutting-down`` first. Instances terminated here stay shutting-down until the test lets them go."""
    held: list[Any] = []
    original = MotoInstance.terminate

    def terminate(self: Any) -> Any:
        previous = original(self)
        self._state.name, self._state.code = "shutting-down", 32
        held.append(self)
        return previous

    monkeypatch.setattr(MotoInstance, "terminate", terminate)
    yield held


async def test_the_nodeclaim_waits_for_shutting_down_and_is_released_once_terminated(
        aws: OfflineAWS, provider: Any, slow_shutdown: list[Any]) -> None:
    instance = await provider.create(
        LaunchRequest(nodeclaim="nc-1", nodepool="default", nodeclass="default", instance_types=["m5.large"]),
        aws.nodeclass())
    now = [NOW]
    kube = MemoryKube(clock=lambda: now[0])
    await kube.create({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "nc-1", "labels": {wk.NODEPOOL: "default"}, "finalizers": [wk.TERMINATION_FINALIZER]},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": []},
    })
    await kube.patch(NODECLAIM, "nc-1", {"status": {"providerID": instance.provider_id}}, subresource="status")
    await kube.delete(NODECLAIM, "nc-1")
    recorder = Recorder().attach(provider, services=("ec2",))
    terminator = Terminator(kube, provider)

    first = await terminator.step(await kube.get(NODECLAIM, "nc-1"), now[0])
    assert first.instance_deleted and first.awaiting_instance and not first.finished
    assert len(recorder.of("TerminateInstances")) == 1
    assert (await provider.get(instance.provider_id)).state == "shutting-down"

    now[0] += timedelta(seconds=5)
    again = await terminator.step(await kube.get(NODECLAIM, "nc-1"), now[0])
    assert again.awaiting_instance and not again.finished
    assert len(recorder.of("TerminateInstances")) == 1  # shutting down already: no second terminate
    assert wk.TERMINATION_FINALIZER in (await kube.get(NODECLAIM, "nc-1"))["metadata"]["finalizers"]

    for held in slow_shutdown:
        held._state.name, held._state.code = "terminated", 48
    now[0] += timedelta(seconds=40)
    done = await terminator.step(await kube.get(NODECLAIM, "nc-1"), now[0])
    assert done.finished and done.instance_termination_seconds == 45.0
    with pytest.raises(NotFoundError):
        await kube.get(NODECLAIM, "nc-1")
