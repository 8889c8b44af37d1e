"""JSON in and out: `snapshot -o x.json` and `kubectl get -o json` dumps load through json (several times
faster than YAML on large clusters) and give exactly the answers the YAML form gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from insight_support import example_cluster, run_cli, write_snapshot


def test_json_snapshot_and_kubectl_json_list_answer_as_yaml(capsys: Any, tmp_path: Path) -> None:
    as_yaml = write_snapshot(tmp_path, example_cluster())
    as_json = tmp_path / "snapshot.json"
    code, _, err = run_cli(capsys, "snapshot", "--from", str(as_yaml), "-o", str(as_json))
    assert code == 0, err
    document = json.loads(as_json.read_text())
    assert document["objects"] == yaml.safe_load(as_yaml.read_text())["objects"]

    # What `kubectl get nodes,pods,... -A -o json` writes: one List of items.
    listed = tmp_path / "dump.json"
    listed.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": document["objects"]}))

    answers = []
    for source in (as_yaml, as_json, listed):
        code, out, err = run_cli(capsys, "status", "--snapshot", str(source), "--json")
        assert code == 0, err
        answers.append(json.loads(out))
    assert answers[0] == answers[1]
    # The dump has no catalogue, so it is priced by the bundled preset (same figures, its own source).
    def without_source(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in node.items() if k != "priceSource"} for node in nodes]

    assert without_source(answers[2]["nodes"]) == without_source(answers[0]["nodes"])
    assert answers[2]["costPerHour"] == answers[0]["costPerHour"]
    assert answers[2]["priceSources"] == ["bundled AWS on-demand list prices (us-east-1, as of 2026-07-20)"]


def test_broken_json_is_a_one_line_error_with_the_place(capsys: Any, tmp_path: Path) -> None:
    broken = tmp_path / "dump.json"
    broken.write_text('{"apiVersion": "v1", "kind": "List", "items": [\n  {"kind": "Node",\n')
    code, _, err = run_cli(capsys, "status", "--snapshot", str(broken))
    assert code == 2
    assert err.startswith(f"error: {broken}:") and "line" in err and len(err.strip().splitlines()) == 1


def test_a_kubectl_dump_out_of_bounds_is_refused_and_a_good_one_is_walked_once(
        capsys: Any, tmp_path: Path, monkeypatch: Any) -> None:
    from reconciler.insight import sources
    from reconciler.sim import scenario

    objects = json.loads(json.dumps(yaml.safe_load(write_snapshot(tmp_path, example_cluster()).read_text())))["objects"]
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(70):
        node["x"] = {}
        node = node["x"]
    bad = [{**objects[0], "metadata": {**objects[0]["metadata"], "annotations": {"a": "\ud800"}}},
           {**objects[0], "spec": {"extra": deep}}]
    for index, item in enumerate(bad):
        dump = tmp_path / f"bad-{index}.json"
        dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [item, *objects[1:]]}))
        code, _, err = run_cli(capsys, "status", "--snapshot", str(dump))
        assert code == 2 and err.count("\n") == 1, err
        assert ("not valid Unicode" if index == 0 else "nested deeper than 64 levels") in err, err

    walked: list[int] = []
    original = scenario.check_document_bounds

    def counting(document: Any, *args: Any) -> None:
        walked.append(len(document.get("objects") or ()) if isinstance(document, dict) else 0)
        original(document, *args)

    shaped: list[str] = []
    original_shape = sources.check_manifest_shape

    def counting_shapes(manifest: Any, path: str) -> None:
        shaped.append(path)
        original_shape(manifest, path)

    monkeypatch.setattr(scenario, "check_document_bounds", counting)
    monkeypatch.setattr(sources, "check_manifest_shape", counting_shapes)
    monkeypatch.setattr(scenario, "check_manifest_shape", counting_shapes)
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    sources.load_snapshot(dump).scenario()
    # The sanitized objects: bounds and shapes checked as the dump was read, and not again.
    assert walked and all(count == 0 for count in walked)
    assert len(shaped) == len(objects) and all(".items[" in path for path in shaped), shaped


def test_a_wrongly_typed_field_in_a_kubectl_dump_is_named_by_its_item(capsys: Any, tmp_path: Path) -> None:
    objects = yaml.safe_load(write_snapshot(tmp_path, example_cluster()).read_text())["objects"]
    index, pod = next((i, o) for i, o in enumerate(objects) if o["kind"] == "Pod")
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": ["1"]}}
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    code, _, err = run_cli(capsys, "status", "--snapshot", str(dump))
    assert code == 2 and err.count("\n") == 1, err
    assert f"items[{index}].spec.containers[0].resources.requests.cpu: expected a quantity" in err, err
