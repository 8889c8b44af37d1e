"""``simulate`` text output stays readable on large steps: counts per NodePool/type and the first rows,
everything with ``--verbose``; the JSON result is never summarised."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from reconciler.cli import main
from reconciler.sim.report import STEP_LIMIT

REPO = Path(__file__).resolve().parents[2]


def _scenario(tmp_path: Path, replicas: int) -> Path:
    """``examples/plan/cluster.yaml`` plus a Deployment whose pods each need a node of their own."""
    document = yaml.safe_load((REPO / "examples/plan/cluster.yaml").read_text())
    web = next(o for o in document["objects"] if o["kind"] == "Deployment" and o["metadata"]["name"] == "web")
    spread = copy.deepcopy(web)
    spread["metadata"]["name"] = "spread"
    spread["spec"]["replicas"] = replicas
    template = spread["spec"]["template"]
    template["metadata"]["labels"] = {"app": "spread"}
    spread["spec"]["selector"] = {"matchLabels": {"app": "spread"}}
    template["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "spread"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    document["objects"].append(spread)
    document["steps"] = [{"provision": {}}]
    path = tmp_path / "spread.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_large_steps_are_summarised_unless_verbose(tmp_path: Path, capsys: Any) -> None:
    scenario = _scenario(tmp_path, 40)
    assert main(["simulate", str(scenario), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    launched = result["steps"][0]["launched"]
    assert len(launched) > STEP_LIMIT + 10

    assert main(["simulate", str(scenario)]) == 0
    short = capsys.readouterr().out
    assert main(["simulate", str(scenario), "--verbose"]) == 0
    full = capsys.readouterr().out
    assert f"  launched {len(launched)}: " in short and "general/" in short.split("launched ")[1].splitlines()[0]
    assert f"... {len(launched) - STEP_LIMIT} more (--verbose lists all)" in short
    assert all(item["nodeclaim"] in full for item in launched)
    assert sum(item["nodeclaim"] in short for item in launched) < len(launched)
    assert len(short.splitlines()) < len(full.splitlines()) - len(launched)
    assert f"final nodes ({len(result['final']['nodes'])}):" in short
