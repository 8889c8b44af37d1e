"""Karpenter's own example manifests parse with the models and validate against the generated CRDs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.api import EC2NodeClass, NodePool, ValidationFailure, is_karpenter_manifest, parse_object
from reconciler.api.crd_validation import validate

EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "data" / "karpenter-examples" / "v1"
# Upstream bug: this example's nodeClassRef.group is "karpenter.k8s.aws/v1", which Karpenter's own CRD
# rejects (pattern ^[^/]*$). We reject it the same way, with the same field path.
KNOWN_INVALID = {("windows-custom-userdata.yaml", "NodePool"): "spec.template.spec.nodeClassRef.group"}


def _documents() -> list[tuple[str, dict[str, Any]]]:
    if not EXAMPLES.is_dir():
        return []
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and is_karpenter_manifest(document):
                found.append((path.name, document))
    return found


DOCUMENTS = _documents()
IDS = [f"{name}:{doc['kind']}:{doc['metadata']['name']}" for name, doc in DOCUMENTS]
pytestmark = pytest.mark.skipif(not DOCUMENTS, reason=f"{EXAMPLES} is not present")


def test_all_example_files_are_covered() -> None:
    assert len({name for name, _ in DOCUMENTS}) == 22
    assert {doc["kind"] for _, doc in DOCUMENTS} == {"NodePool", "EC2NodeClass"}


@pytest.mark.parametrize(("file_name", "manifest"), DOCUMENTS, ids=IDS)
def test_models_accept_examples(file_name: str, manifest: dict[str, Any]) -> None:
    invalid_path = KNOWN_INVALID.get((file_name, manifest["kind"]))
    if invalid_path:
        with pytest.raises(ValidationFailure) as caught:
            parse_object(manifest)
        assert [problem.path for problem in caught.value.problems] == [invalid_path]
        return
    parsed = parse_object(manifest)
    assert isinstance(parsed, NodePool | EC2NodeClass)
    assert parsed.name == manifest["metadata"]["name"]
    dumped = parsed.model_dump(by_alias=True, exclude_none=True)
    assert parse_object(dumped) == parsed
    assert parse_object(parsed.to_manifest()) == parsed


@pytest.mark.parametrize(("file_name", "manifest"), DOCUMENTS, ids=IDS)
def test_crds_accept_examples(file_name: str, manifest: dict[str, Any], crds: list[dict[str, Any]]) -> None:
    errors = validate(manifest, crds)
    invalid_path = KNOWN_INVALID.get((file_name, manifest["kind"]))
    if invalid_path:
        assert len(errors) == 1 and errors[0].startswith(f"{invalid_path}:"), errors
    else:
        assert errors == []


@pytest.mark.parametrize(("file_name", "manifest"), DOCUMENTS, ids=IDS)
def test_model_output_is_what_the_api_server_stores(
    file_name: str, manifest: dict[str, Any], crds: list[dict[str, Any]]
) -> None:
    """Our dumped manifest (defaults filled in by the models) is itself valid for the CRD."""
    if (file_name, manifest["kind"]) in KNOWN_INVALID:
        pytest.skip("invalid upstream example")
    assert validate(parse_object(manifest).to_manifest(), crds) == []
