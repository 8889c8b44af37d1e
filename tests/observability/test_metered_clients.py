"""client-go's request metrics as ``MeteredKube`` reports them: status code and HTTP method per request, latency by
verb, group, version, resource and subresource (operatorpkg's adapter's labels)."""

from __future__ import annotations

import pytest
from ctrl_objects import nodepool

from reconciler.controllers.exporters.metered_clients import MeteredKube
from reconciler.kube.api import NODEPOOL, POD, NotFoundError
from reconciler.kube.memory import MemoryKube
from reconciler.observability import Metrics


async def test_requests_are_counted_by_code_and_method_and_timed_by_verb_and_resource() -> None:
    metrics = Metrics()
    kube = MeteredKube(MemoryKube(), metrics.runtime)
    await kube.create(nodepool())
    await kube.list(NODEPOOL)
    await kube.patch(NODEPOOL, "default", {"status": {"nodes": 1}}, subresource="status")
    with pytest.raises(NotFoundError):
        await kube.get(POD, "missing", "default")
    await kube.list(POD, "default", field_selector="spec.nodeName=n-1")
    count = metrics.sample
    assert count("client_go_request_total", {"code": "201", "method": "POST"}) == 1
    assert count("client_go_request_total", {"code": "200", "method": "GET"}) == 2
    assert count("client_go_request_total", {"code": "200", "method": "PATCH"}) == 1
    assert count("client_go_request_total", {"code": "404", "method": "GET"}) == 1
    karpenter = {"group": "karpenter.sh", "version": "v1", "kind": "nodepools"}
    assert count("client_go_request_duration_seconds_count", {**karpenter, "verb": "CREATE", "subresource": ""}) == 1
    assert count("client_go_request_duration_seconds_count", {**karpenter, "verb": "LIST", "subresource": ""}) == 1
    assert count("client_go_request_duration_seconds_count",
                 {**karpenter, "verb": "PATCH", "subresource": "status"}) == 1
    core = {"group": "", "version": "v1", "kind": "pods", "subresource": ""}
    assert count("client_go_request_duration_seconds_count", {**core, "verb": "GET"}) == 1
    assert count("client_go_request_duration_seconds_count", {**core, "verb": "LIST"}) == 1
