"""Fields Adze does not implement are reported on the objects that set them: condition, event, log line."""

from __future__ import annotations

from typing import Any

from ctrl_harness import Rig, running, wait_for
from ctrl_objects import nodeclass, nodepool

from reconciler.kube.api import EC2NODECLASS, EVENT, NODEPOOL

BOTTLEROCKET = [{"alias": "bottlerocket@latest"}]


def fields_supported(rig: Rig, kind: Any, name: str) -> dict[str, Any] | None:
    stored = rig.kube.peek(kind, name) or {}
    return next((c for c in (stored.get("status") or {}).get("conditions") or []
                 if c["type"] == "FieldsSupported"), None)


async def test_unsupported_fields_get_a_false_condition_an_event_and_a_log_line_until_removed() -> None:
    rig = Rig()
    static = nodepool("fixed")
    static["spec"]["replicas"] = 2  # StaticCapacity is off in these settings
    dropped = nodeclass(amiSelectorTerms=BOTTLEROCKET, kubelet={"podsPerCore": 4, "maxPods": 50})
    await rig.apply(dropped, nodepool(), static)
    async with running(rig):
        assert await wait_for(lambda: _condition_is(rig, EC2NODECLASS, "default", "False"))
        assert await wait_for(lambda: _condition_is(rig, NODEPOOL, "fixed", "False"))
        found = fields_supported(rig, EC2NODECLASS, "default")
        assert found is not None and found["reason"] == "UnsupportedField"
        assert found["message"] == ("spec.kubelet: spec.kubelet has fields not applied by the Bottlerocket AMI family "
                                    "that would be silently dropped: podsPerCore")
        static_condition = fields_supported(rig, NODEPOOL, "fixed")
        assert static_condition is not None
        assert static_condition["message"] == ("spec.replicas: needs the StaticCapacity feature gate, which is "
                                              "off: Adze ignores it")
        assert fields_supported(rig, NODEPOOL, "default") is None  # nothing to report: no condition written
        # Still Ready: Adze uses the class for what it implements.
        assert await wait_for(lambda: _condition_is(rig, EC2NODECLASS, "default", "True", "Ready"))

        await rig.kube.patch(EC2NODECLASS, "default", {"spec": {"kubelet": {"podsPerCore": None}}})
        assert await wait_for(lambda: _condition_is(rig, EC2NODECLASS, "default", "True"))
    events = [e for e in rig.kube.objects(EVENT) if e["reason"] == "UnsupportedField"]
    assert {e["involvedObject"]["name"] for e in events} == {"default", "fixed"}
    lines = [line for line in rig.log_lines() if line["message"] == "object sets fields Adze does not implement"]
    assert {tuple(line["fields"]) for line in lines} == {("spec.kubelet",),
                                                          ("spec.replicas",)}


async def _condition_is(rig: Rig, kind: Any, name: str, status: str, kind_name: str = "FieldsSupported") -> bool:
    stored = rig.kube.peek(kind, name) or {}
    return any(c["type"] == kind_name and c["status"] == status
               for c in (stored.get("status") or {}).get("conditions") or [])
