"""``--catalog live`` end to end: EC2 from moto, the Pricing API from a stub endpoint (moto has none).

The commands run as a user runs them, configured by the standard AWS environment variables
(``AWS_ENDPOINT_URL`` for EC2, ``AWS_ENDPOINT_URL_PRICING`` for the Pricing API); every price
then says whether it came from the Pricing API, spot price history or the bundled table.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from insight_support import run_cli

from reconciler.cloud import pricesource
from reconciler.cloud.aws.offline import OfflineAWS, start_offline_aws

pytestmark = pytest.mark.slow  # an offline AWS (moto server) and a pricing HTTP server per test, whole-cluster CLI runs

PRICED = {"m5.large": "0.1111", "m5.xlarge": "0.2222", "c5.large": "0.0777"}


def _item(instance_type: str, usd: str) -> str:
    return json.dumps({
        "product": {"attributes": {"instanceType": instance_type}},
        "terms": {"OnDemand": {"T": {"priceDimensions": {"D": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}},
    })


class _PricingAPI(BaseHTTPRequestHandler):
    """GetProducts as the AWS Price List API answers it (JSON 1.1), for the shared and bare-metal queries."""

    calls: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        type(self).calls.append(body)
        filters = {f["Field"]: f["Value"] for f in body.get("Filters") or []}
        if filters.get("tenancy") == "Dedicated":
            items = [_item("m5.metal", "4.9")]
        else:
            items = [_item(name, usd) for name, usd in PRICED.items()]
        payload = json.dumps({"FormatVersion": "aws_v1", "PriceList": items}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def live_aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[OfflineAWS]:
    environment = start_offline_aws(cluster="live-catalog", own_account=True)
    pricing = ThreadingHTTPServer(("127.0.0.1", 0), _PricingAPI)
    threading.Thread(target=pricing.serve_forever, daemon=True).start()
    _PricingAPI.calls = []
    monkeypatch.setenv("AWS_ENDPOINT_URL", environment.endpoint_url)
    monkeypatch.setenv("AWS_ENDPOINT_URL_PRICING", f"http://127.0.0.1:{pricing.server_address[1]}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", environment.credentials["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", environment.credentials["aws_secret_access_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    try:
        yield environment
    finally:
        pricing.shutdown()
        environment.stop()


def _cluster_dump(tmp_path: Path, capsys: Any) -> Path:
    scenario = {
        "settings": {"clock": "2026-01-01T09:00:00Z"},
        "catalog": {"preset": "aws-us-east-1", "zones": ["us-east-1a", "us-east-1b"]},
        "objects": [
            {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"}, "spec": {
                "template": {"spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                    ]}}}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "default"}, "replicas": 2,
             "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}},
        ],
        "steps": [{"provision": {}}],
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    snapshot = tmp_path / "snap.yaml"
    code, _, err = run_cli(capsys, "snapshot", "--scenario", str(path), "-o", str(snapshot))
    assert code == 0, err
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                    "items": yaml.safe_load(snapshot.read_text())["objects"]}))
    return dump


def test_status_and_plan_with_live_catalog_use_the_pricing_api(live_aws: OfflineAWS, tmp_path: Path,
                                                               capsys: Any) -> None:
    dump = _cluster_dump(tmp_path, capsys)
    code, out, err = run_cli(capsys, "status", "--snapshot", str(dump), "--catalog", "live", "--json")
    assert code == 0, err
    status = json.loads(out)
    assert {(n["instanceType"], n["price"], n["priceSource"]) for n in status["nodes"]} == {
        ("m5.large", 0.1111, pricesource.LIVE_ON_DEMAND)
    }
    tenancies = sorted({f["Value"] for call in _PricingAPI.calls for f in call["Filters"] if f["Field"] == "tenancy"})
    assert tenancies == ["Dedicated", "Shared"]
    assert all({"Field": "regionCode", "Type": "TERM_MATCH", "Value": "us-east-1"} in c["Filters"]
               for c in _PricingAPI.calls)

    pools = tmp_path / "pools.yaml"
    pools.write_text(yaml.safe_dump({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"}, "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large"]},
                ]}}}}))
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(dump), "--nodepools", str(pools),
                             "--catalog", "live", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["current"]["costPerHour"] == pytest.approx(2 * 0.1111)
    assert plan["proposed"]["costPerHour"] == pytest.approx(2 * 0.0777)
    assert plan["priceSources"] == [pricesource.LIVE_ON_DEMAND]


def test_simulate_with_live_catalog_and_a_price_file_over_it(live_aws: OfflineAWS, tmp_path: Path,
                                                             capsys: Any) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({
        "catalog": {"preset": "aws-us-east-1", "zones": ["us-east-1a"]},
        "objects": [
            {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"}, "spec": {
                "template": {"spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
                        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "c5"]},
                    ]}}}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "default"},
             "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}},
        ],
        "steps": [{"provision": {}}],
    }))
    code, out, err = run_cli(capsys, "simulate", str(scenario), "--catalog", "live", "--json")
    assert code == 0, err
    [launched] = json.loads(out)["steps"][0]["launched"]
    assert launched["zone"] == "us-east-1a"
    # moto's spot history is a placeholder, but it is what EC2 answered: spot is cheapest, and says so.
    assert (launched["capacityType"], launched["priceSource"]) == ("spot", pricesource.LIVE_SPOT)

    rates = tmp_path / "rates.json"
    rates.write_text(json.dumps([{"instanceType": launched["instanceType"], "capacityType": "spot", "price": 9.0}]))
    code, out, err = run_cli(capsys, "simulate", str(scenario), "--catalog", "live", "--prices", str(rates),
                             "--json")
    assert code == 0, err
    [again] = json.loads(out)["steps"][0]["launched"]
    assert again["instanceType"] != launched["instanceType"] or again["capacityType"] != "spot"
