"""Issue 24, item 5: the fake API server (``tests/support/fake_apiserver.py``) against the real kube-apiserver.

Every case runs the same requests against both servers (``support.api_contract``) and reduces what came back
to the facts a client acts on: status code, ``reason``, ``details`` (kind, group, name, causes with their
fields), the object fields the case is about, the watch events' types and order. The two outcomes must be
equal, and each case also asserts what the API promises (so the two cannot agree on something wrong).

Cases: optimistic concurrency (409 for a stale resourceVersion on PUT, merge patch, JSON patch ``test`` and
delete preconditions; AlreadyExists; NotFound; the CRD update that needs a resourceVersion), watches (resume
from a resourceVersion, 410 Gone for a too-old one, selector watches that see objects enter and leave),
evictions (201; 429 with the DisruptionBudget cause; 500 for a pod under two budgets; 404), graceful deletion
(a bound pod's default grace period, an unbound pod at once, grace 0), finalizers (deletion held, none added
while deleting), field and label selectors (supported and refused ones), the status subresource (each half
ignores the other), and validation (422 with causes naming the fields).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.api_contract import CONTRACT_NODE, ContractServer, contract_servers
from support.control_plane import ControlPlane

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
Outcome = dict[str, Any]


@pytest.fixture(scope="module")
def servers(control_plane: ControlPlane) -> Iterator[dict[str, ContractServer]]:
    with contract_servers(control_plane, "contract") as both:
        yield both


def failure(status: int, body: Any) -> Outcome:
    """What a client reads from an error answer."""
    assert isinstance(body, dict) and body.get("kind") == "Status", (status, body)
    details = body.get("details") or {}
    return {
        "code": status,
        "body code": body.get("code"),
        "status": body.get("status"),
        "reason": body.get("reason"),
        "details": {k: details.get(k) for k in ("name", "group", "kind")},
        # A set: the real server repeats some causes (a forbidden finalizer is reported twice). "<nil>" is its note
        # that CEL rules were skipped after a schema error; the fake's validator checks them regardless.
        "causes": sorted({(c.get("reason"), c.get("field")) for c in details.get("causes") or []
                          if c.get("field") != "<nil>"}),
    }


def lease(name: str, holder: str = "a") -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": holder}}


def nodepool(name: str, **disruption: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": {
        "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                               "name": "default"}, "requirements": []}},
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s", **disruption},
    }}


def nodeclaim(name: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name, "labels": {"a": "1"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}}


def budget(name: str, app: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": app}}, **spec}}


def eviction(name: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}


def leases(api: ContractServer) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{api.namespace}/leases"


def pods(api: ContractServer) -> str:
    return f"/api/v1/namespaces/{api.namespace}/pods"


NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"


# --- optimistic concurrency ------------------------------------------------------------------------------


def stale_writes(api: ContractServer) -> Outcome:
    """PUT, merge patch, JSON patch ``test`` and DELETE preconditions carrying an old resourceVersion."""
    name = api.unique("lease")
    created = api.ok("POST", leases(api), lease(name))
    path = f"{leases(api)}/{name}"
    api.ok("PATCH", path, {"spec": {"holderIdentity": "b"}}, content_type=MERGE)
    stale = created["metadata"]["resourceVersion"]
    put = api.call("PUT", path, {**created, "spec": {"holderIdentity": "c"}})
    merge = api.call("PATCH", path, {"metadata": {"resourceVersion": stale}, "spec": {"holderIdentity": "d"}},
                     content_type=MERGE)
    json_test = api.call("PATCH", path, [{"op": "test", "path": "/metadata/resourceVersion", "value": stale},
                                         {"op": "replace", "path": "/spec/holderIdentity", "value": "e"}],
                         content_type=JSON_PATCH)
    delete = api.call("DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1",
                                       "preconditions": {"resourceVersion": stale}})
    holder = api.ok("GET", path)["spec"]["holderIdentity"]
    outcome = {"put": failure(*put), "merge": failure(*merge), "json test": failure(*json_test)[ "code"],
               "delete": failure(*delete), "holder": holder}
    assert outcome["put"]["code"] == outcome["merge"]["code"] == outcome["delete"]["code"] == 409
    assert outcome["put"]["reason"] == "Conflict" and holder == "b"
    assert outcome["put"]["details"] == {"name": name, "group": "coordination.k8s.io", "kind": "leases"}
    conflict = put[1]["message"]
    assert conflict.startswith(f'Operation cannot be fulfilled on leases.coordination.k8s.io "{name}"'), conflict
    return outcome


def current_writes(api: ContractServer) -> Outcome:
    """Writes with the current resourceVersion succeed; a no-op keeps it. A PUT without one: accepted for a
    ConfigMap (its strategy allows unconditional updates), refused for a Lease and a custom resource."""
    name = api.unique("lease")
    created = api.ok("POST", leases(api), lease(name))
    path = f"{leases(api)}/{name}"
    same = api.ok("PUT", path, created)
    changed = api.ok("PUT", path, {**created, "spec": {"holderIdentity": "b"}})

    def unversioned(obj: dict[str, Any], **changes: Any) -> dict[str, Any]:
        return {**obj, **changes, "metadata": {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}}

    lease_put = api.call("PUT", path, unversioned(changed, spec={"holderIdentity": "c"}))
    config = api.ok("POST", f"/api/v1/namespaces/{api.namespace}/configmaps",
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}})
    config_put = api.call("PUT", f"/api/v1/namespaces/{api.namespace}/configmaps/{name}",
                          unversioned(config, data={"a": "2"}))
    pool = api.ok("POST", NODEPOOLS, nodepool(api.unique("pool")))
    pool_path = f"{NODEPOOLS}/{pool['metadata']['name']}"
    pool_put = api.call("PUT", pool_path, unversioned(pool))
    api.ok("DELETE", pool_path)
    outcome = {
        "no-op keeps the version": same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"],
        "change bumps it": int(changed["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"]),
        "Lease PUT without version": failure(*lease_put),
        "ConfigMap PUT without version": (config_put[0], config_put[1]["data"]),
        "CRD PUT without version": failure(*pool_put),
    }
    assert outcome["no-op keeps the version"] and outcome["change bumps it"]
    assert outcome["ConfigMap PUT without version"] == (200, {"a": "2"})
    assert outcome["Lease PUT without version"]["causes"] == [("FieldValueInvalid", "metadata.resourceVersion")]
    assert outcome["CRD PUT without version"]["code"] == 422
    return outcome


def exists_and_missing(api: ContractServer) -> Outcome:
    name = api.unique("lease")
    api.ok("POST", leases(api), lease(name))
    again = api.call("POST", leases(api), lease(name))
    missing = api.call("GET", f"{leases(api)}/{api.unique('absent')}")
    missing_claim = api.call("GET", f"{NODECLAIMS}/absent-claim")
    outcome = {"again": failure(*again), "missing": failure(*missing)["code"], "claim": failure(*missing_claim)}
    assert outcome["again"]["code"] == 409 and outcome["again"]["reason"] == "AlreadyExists"
    assert outcome["claim"]["details"] == {"name": "absent-claim", "group": "karpenter.sh", "kind": "nodeclaims"}
    assert missing_claim[1]["message"] == 'nodeclaims.karpenter.sh "absent-claim" not found'
    return outcome


# --- watches ---------------------------------------------------------------------------------------------


def watch_resumes(api: ContractServer) -> Outcome:
    """A watch from a resourceVersion replays what came after it, in order, then follows live changes."""
    name = api.unique("lease")
    created = api.ok("POST", leases(api), lease(name))
    path = f"{leases(api)}/{name}"
    first = api.ok("PATCH", path, {"spec": {"holderIdentity": "b"}}, content_type=MERGE)
    second = api.ok("PATCH", path, {"spec": {"holderIdentity": "c"}}, content_type=MERGE)
    status, events = api.watch(
        leases(api), created["metadata"]["resourceVersion"], count=3,
        query={"fieldSelector": f"metadata.name={name}"},
        during=lambda: api.ok("DELETE", path))
    seen = [(e["type"], e["object"]["metadata"]["resourceVersion"], e["object"]["spec"].get("holderIdentity"))
            for e in events]
    assert status == 200
    assert seen[:2] == [("MODIFIED", first["metadata"]["resourceVersion"], "b"),
                        ("MODIFIED", second["metadata"]["resourceVersion"], "c")], seen
    return {"types": [t for t, _, _ in seen], "holders": [h for _, _, h in seen]}


def watch_too_old(api: ContractServer) -> Outcome:
    """A resourceVersion older than the server still knows: HTTP 200, then an ERROR event 410 Expired."""
    api.ok("POST", leases(api), lease(api.unique("lease")))
    version = api.too_old_resource_version()
    status, events = api.watch(leases(api), version, count=1)
    assert status == 200 and events and events[0]["type"] == "ERROR", (status, events)
    error = events[0]["object"]
    outcome = {"http": status, "type": events[0]["type"], "error": failure(error["code"], error)}
    assert outcome["error"]["code"] == 410 and outcome["error"]["reason"] == "Expired"
    return outcome


def watch_selector_enter_leave(api: ContractServer) -> Outcome:
    """A label-selected watch: an object that stops matching is DELETED (carrying its last matching state, as
    the watch cache sends it), one that starts matching ADDED."""
    name = api.unique("lease")
    manifest = lease(name)
    manifest["metadata"]["labels"] = {"watched": "yes"}
    created = api.ok("POST", leases(api), manifest)
    path = f"{leases(api)}/{name}"

    def leave_and_return() -> None:
        api.ok("PATCH", path, {"metadata": {"labels": {"watched": "no"}}}, content_type=MERGE)
        api.ok("PATCH", path, {"spec": {"holderIdentity": "unseen"}}, content_type=MERGE)
        api.ok("PATCH", path, {"metadata": {"labels": {"watched": "yes"}}}, content_type=MERGE)

    status, events = api.watch(leases(api), created["metadata"]["resourceVersion"], count=2,
                               query={"labelSelector": "watched=yes"}, during=leave_and_return)
    seen = [(e["type"], e["object"]["metadata"]["labels"]["watched"], e["object"]["spec"]["holderIdentity"])
            for e in events]
    assert seen == [("DELETED", "yes", "a"), ("ADDED", "yes", "unseen")], seen
    return {"http": status, "events": seen}


# --- evictions -------------------------------------------------------------------------------------------


def evictions(api: ContractServer) -> Outcome:
    """No budget: 201; a budget with no disruption left: 429 + DisruptionBudget; two budgets: 500; no pod: 404."""
    free, guarded, doubly = api.unique("free"), api.unique("guarded"), api.unique("doubly")
    api.running_pods([f"{free}-0"], {"app": free})
    guarded_pods = api.replica_set(guarded, 2)
    api.running_pods([f"{doubly}-0"], {"app": doubly, "tier": "x"})
    budgets = f"/apis/policy/v1/namespaces/{api.namespace}/poddisruptionbudgets"
    api.ok("POST", budgets, budget(guarded, guarded, maxUnavailable=0))
    api.ok("POST", budgets, budget(f"{doubly}-a", doubly, minAvailable=0))
    tier = budget(f"{doubly}-b", doubly, minAvailable=0)
    tier["spec"]["selector"] = {"matchLabels": {"app": doubly, "tier": "x"}}
    api.ok("POST", budgets, tier)
    api.settled_budget(guarded, 2)
    api.settled_budget(f"{doubly}-a", 1)
    api.settled_budget(f"{doubly}-b", 1)

    def evict(pod: str) -> tuple[int, Any]:
        return api.call("POST", f"{pods(api)}/{pod}/eviction", eviction(pod))

    answers = []
    version = api.ok("GET", f"{pods(api)}/{free}-0")["metadata"]["resourceVersion"]
    _, events = api.watch(pods(api), version, count=2, query={"fieldSelector": f"metadata.name={free}-0"},
                          during=lambda: answers.append(evict(f"{free}-0")))
    allowed = answers[0]
    refused = evict(guarded_pods[0])
    two = evict(f"{doubly}-0")
    missing = evict(api.unique("nobody"))
    mismatched = api.call("POST", f"{pods(api)}/{guarded_pods[1]}/eviction", eviction("someone-else"))
    outcome = {
        "allowed": (allowed[0], (allowed[1] or {}).get("status")),
        "evicted pod": [(e["type"], _disruption_target(e["object"]), bool(e["object"]["metadata"].get(
            "deletionTimestamp")), e["object"]["metadata"].get("deletionGracePeriodSeconds")) for e in events],
        "refused": failure(*refused),
        "refused message": refused[1]["message"],
        "refused cause": [c.get("message", "") for c in refused[1]["details"]["causes"]],
        "two budgets": failure(*two),
        "two budgets message": two[1]["message"],
        "missing": failure(*missing)["code"],
        "mismatched": failure(*mismatched)["code"],
    }
    assert outcome["allowed"] == (201, "Success")
    assert outcome["evicted pod"] == [("MODIFIED", True, False, None), ("MODIFIED", True, True, 30)]
    assert outcome["refused"]["code"] == 429 and outcome["refused"]["causes"] == [("DisruptionBudget", None)]
    assert outcome["two budgets"]["code"] == 500
    return outcome


def eviction_budget_spent(api: ContractServer) -> Outcome:
    """``minAvailable: 2`` of three pods: the first eviction is allowed, the second not: the eviction itself
    spends the budget. Bare pods, so nothing replaces the evicted one (with a ReplicaSet the real cluster may
    have a replacement Ready, and the budget back, before the second eviction arrives: a race, not a rule)."""
    app = api.unique("spend")
    spenders = [f"{app}-{index}" for index in range(3)]
    api.running_pods(spenders, {"app": app})
    api.ok("POST", f"/apis/policy/v1/namespaces/{api.namespace}/poddisruptionbudgets",
           budget(app, app, minAvailable=2))
    api.settled_budget(app, 3)
    first = api.call("POST", f"{pods(api)}/{spenders[0]}/eviction", eviction(spenders[0]))
    second = api.call("POST", f"{pods(api)}/{spenders[1]}/eviction", eviction(spenders[1]))
    outcome = {"first": first[0], "second": failure(*second)}
    assert outcome["first"] == 201 and outcome["second"]["code"] == 429
    return outcome


def _disruption_target(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


# --- graceful deletion and finalizers ----------------------------------------------------------------------


def graceful_deletion(api: ContractServer) -> Outcome:
    """A bound pod deleted without options gets its own grace period; an unbound one goes at once; 0 at once."""
    bound, quick = api.unique("bound"), api.unique("quick")
    api.running_pods([bound], {"app": bound}, grace=30)
    api.running_pods([quick], {"app": quick}, grace=30)
    unbound = api.unique("unbound")
    api.pending_pod(unbound)
    deleted = api.ok("DELETE", f"{pods(api)}/{bound}")  # the kubelet then stops it (kwok: at once)
    api.ok("DELETE", f"{pods(api)}/{unbound}", {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 30})
    api.ok("DELETE", f"{pods(api)}/{quick}", {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
    outcome = {
        "answer kind": deleted.get("kind"),
        "grace": deleted["metadata"].get("deletionGracePeriodSeconds"),
        "marked": bool(deleted["metadata"].get("deletionTimestamp")),
        "unbound": api.call("GET", f"{pods(api)}/{unbound}")[0],
        "grace 0": api.call("GET", f"{pods(api)}/{quick}")[0],
    }
    assert outcome == {"answer kind": "Pod", "grace": 30, "marked": True, "unbound": 404, "grace 0": 404}, outcome
    return outcome


def finalizers_hold_deletion(api: ContractServer) -> Outcome:
    """A finalizer keeps a deleted object (deletionTimestamp set); none may be added then; removing the last
    one lets it go. Objects without finalizers go at once."""
    name = api.unique("held")
    claim = nodeclaim(name)
    claim["metadata"]["finalizers"] = ["example.com/hold"]
    api.ok("POST", NODECLAIMS, claim)
    path = f"{NODECLAIMS}/{name}"
    answer = api.ok("DELETE", path)
    held = api.ok("GET", path)
    again = api.ok("DELETE", path)
    added = api.call("PATCH", path, {"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}},
                     content_type=MERGE)
    api.ok("PATCH", path, {"metadata": {"finalizers": None}}, content_type=MERGE)
    gone = api.call("GET", path)
    plain = api.unique("plain")
    api.ok("POST", NODECLAIMS, nodeclaim(plain))
    plain_answer = api.ok("DELETE", f"{NODECLAIMS}/{plain}")
    outcome = {
        "answer": (answer.get("kind"), bool(answer["metadata"].get("deletionTimestamp"))),
        "held": (bool(held["metadata"].get("deletionTimestamp")), held["metadata"].get("finalizers")),
        "deleting again keeps the timestamp": again["metadata"]["deletionTimestamp"]
        == held["metadata"]["deletionTimestamp"],
        "adding a finalizer": failure(*added),
        "after the last finalizer": gone[0],
        "without finalizers": (plain_answer.get("kind"), api.call("GET", f"{NODECLAIMS}/{plain}")[0]),
    }
    assert outcome["held"] == (True, ["example.com/hold"]) and outcome["after the last finalizer"] == 404
    assert outcome["adding a finalizer"]["code"] == 422
    return outcome


# --- selectors -------------------------------------------------------------------------------------------


def selectors(api: ContractServer) -> Outcome:
    app = api.unique("sel")
    api.running_pods([f"{app}-a"], {"app": app, "tier": "web"})
    api.running_pods([f"{app}-b"], {"app": app, "tier": "db", "legacy": "true"})
    api.pending_pod(f"{app}-pending")

    def names(query: dict[str, str]) -> list[str] | int:
        status, answer = api.call("GET", pods(api), query=query)
        if status != 200:
            return status
        return sorted(p["metadata"]["name"] for p in answer["items"] if p["metadata"]["name"].startswith(app))

    outcome = {
        "label equality": names({"labelSelector": f"app={app},tier==web"}),
        "label inequality": names({"labelSelector": f"app={app},tier!=web"}),
        "label set": names({"labelSelector": f"app={app},tier in (db,cache)"}),
        "label exists": names({"labelSelector": "legacy"}),
        "label absent": names({"labelSelector": f"app={app},!legacy"}),
        "label malformed": names({"labelSelector": "tier in db"}),
        "node name": names({"fieldSelector": f"spec.nodeName={CONTRACT_NODE}"}),
        "phase": names({"fieldSelector": "status.phase=Pending"}),
        "name": names({"fieldSelector": f"metadata.name={app}-a"}),
        "both": names({"fieldSelector": f"spec.nodeName={CONTRACT_NODE}", "labelSelector": "tier=db"}),
        "unsupported pod field": names({"fieldSelector": "spec.priority=0"}),
        "label as a field": names({"fieldSelector": f"metadata.labels.app={app}"}),
        "unsupported CRD field": api.call("GET", NODECLAIMS, query={"fieldSelector": "spec.nodeClassRef.name=x"})[0],
        "CRD name field": api.call("GET", NODECLAIMS, query={"fieldSelector": "metadata.name=x"})[0],
    }
    assert outcome["label equality"] == [f"{app}-a"] and outcome["both"] == [f"{app}-b"]
    assert outcome["phase"] == [f"{app}-pending"] and outcome["label malformed"] == 400
    return outcome


# --- the status subresource ------------------------------------------------------------------------------


def status_subresource(api: ContractServer) -> Outcome:
    """Writes to the object ignore ``status``; writes to ``/status`` ignore the rest (labels and spec);
    generation follows spec changes only."""
    name = api.unique("pool")
    pool = nodepool(name)
    pool["metadata"]["labels"] = {"a": "1"}
    pool["status"] = {"resources": {"cpu": "5"}}
    created = api.ok("POST", NODEPOOLS, pool)
    path = f"{NODEPOOLS}/{name}"
    status_write = api.ok("PATCH", f"{path}/status", {
        "metadata": {"labels": {"a": "2"}}, "spec": {"weight": 7}, "status": {"resources": {"cpu": "1"}}},
        content_type=MERGE)
    main_write = api.ok("PATCH", path, {"metadata": {"labels": {"a": "3"}}, "status": {"resources": {"cpu": "2"}}},
                        content_type=MERGE)
    spec_write = api.ok("PATCH", path, {"spec": {"weight": 9}}, content_type=MERGE)
    api.ok("DELETE", path)
    pod = api.unique("spod")
    api.pending_pod(pod)
    pod_status = api.ok("PATCH", f"{pods(api)}/{pod}/status", {
        "spec": {"nodeSelector": {"changed": "yes"}}, "status": {"message": "from status"}}, content_type=MERGE)
    generation = created["metadata"]["generation"]

    def seen(obj: dict[str, Any]) -> tuple[Any, ...]:
        cpu = ((obj.get("status") or {}).get("resources") or {}).get("cpu")
        return (obj["metadata"]["labels"]["a"], obj["spec"].get("weight"), cpu,
                obj["metadata"]["generation"] - generation)

    outcome = {
        "status on create": created.get("status"),
        "status write": seen(status_write),
        "main write": seen(main_write),
        "spec write": seen(spec_write),
        "pod status write": (pod_status["spec"]["nodeSelector"], pod_status["status"].get("message")),
    }
    assert outcome["status write"] == ("1", None, "1", 0) and outcome["main write"] == ("3", None, "1", 0)
    assert outcome["spec write"] == ("3", 9, "1", 1)
    assert outcome["pod status write"] == ({"contract/none": "true"}, "from status")
    return outcome


# --- validation ------------------------------------------------------------------------------------------


def validation_errors(api: ContractServer) -> Outcome:
    name = api.unique("bad")
    enum = api.call("POST", NODEPOOLS, nodepool(name, consolidationPolicy="Sometimes"))
    pattern = api.call("POST", NODEPOOLS, nodepool(name, consolidateAfter="soon"))
    nameless = api.call("POST", leases(api), {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                              "metadata": {}, "spec": {}})
    bad_pod = api.call("POST", pods(api), {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Bad_Name"},
                                           "spec": {"containers": [{"name": "app", "image": "x"}]}})
    outcome = {"enum": failure(*enum), "pattern": failure(*pattern), "nameless": failure(*nameless),
               "pod": failure(*bad_pod)}
    assert outcome["enum"]["code"] == 422 and outcome["enum"]["reason"] == "Invalid"
    assert outcome["enum"]["details"] == {"name": name, "group": "karpenter.sh", "kind": "NodePool"}
    assert ("FieldValueNotSupported", "spec.disruption.consolidationPolicy") in outcome["enum"]["causes"]
    return outcome


CASES: dict[str, Callable[[ContractServer], Outcome]] = {
    case.__name__: case for case in (
        stale_writes, current_writes, exists_and_missing, watch_resumes, watch_too_old, watch_selector_enter_leave,
        evictions, eviction_budget_spent, graceful_deletion, finalizers_hold_deletion, selectors,
        status_subresource, validation_errors,
    )
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_fake_and_the_real_api_server_agree(servers: dict[str, ContractServer], case: str) -> None:
    outcomes = {}
    for name, server in servers.items():
        try:
            outcomes[name] = CASES[case](server)
        except AssertionError as err:
            raise AssertionError(f"{name} server: {err}") from err
    assert outcomes["fake"] == outcomes["real"]
