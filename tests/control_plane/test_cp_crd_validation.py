"""Issue 24, 4(h): the CRDs ``python -m reconciler crds`` prints, installed on a real kube-apiserver, make the
server's own OpenAPI schema and CEL validation reject what Karpenter's CRDs reject and accept Karpenter's
published examples.

Every object goes through a server-side dry run (``?dryRun=All``): full validation and admission, nothing
stored. The invalid cases are ``tests/api/test_api_invalid.py``'s table; where that table says only the
models catch a case (``crd_rejects=False``), the real server must accept it, so the table's claim about the
CRD (checked offline by ``reconciler.api.crd_validation``) is itself checked against the real thing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from support.control_plane import ControlPlane, object_path

_API_TESTS = str(Path(__file__).resolve().parents[1] / "api")
if _API_TESTS not in sys.path:
    sys.path.insert(0, _API_TESTS)

from test_api_examples import DOCUMENTS, IDS, KNOWN_INVALID  # noqa: E402
from test_api_invalid import CASES, Case  # noqa: E402

CRD_CASES = [case for case in CASES if case.crd_rejects]
MODEL_ONLY_CASES = [case for case in CASES if not case.crd_rejects]


def dry_run_create(plane: ControlPlane, manifest: dict[str, Any]) -> tuple[int, Any]:
    collection = object_path(manifest).rsplit("/", 1)[0]
    return plane.raw_request("POST", collection, manifest, query={"dryRun": "All", "fieldValidation": "Strict"})


def _fields(answer: Any) -> list[str]:
    """The fields a rejection names: its causes (422 Invalid), or the unknown fields of a strict decoding
    error (400: the schema prunes unknown fields; a client asking ``fieldValidation=Strict``, as kubectl
    does, gets them refused)."""
    causes = ((answer or {}).get("details") or {}).get("causes") or []
    unknown = re.findall(r'unknown field "([^"]+)"', str((answer or {}).get("message", "")))
    return [str(cause.get("field", "")) for cause in causes] + unknown


def _rejected(status: int, answer: Any) -> bool:
    return (status == 422 and answer.get("reason") == "Invalid") or (
        status == 400 and "strict decoding error" in str(answer.get("message")))


def _related(case_path: str, field: str) -> bool:
    """The server names the field itself, or the object holding the CEL rule that failed (at or above it);
    map keys appear as ``[key]`` in our paths and ``.key`` or ``[key]`` in the server's."""
    ours = case_path.replace("[", ".").replace("]", "")
    theirs = field.replace("[", ".").replace("]", "").replace("\\", "")
    return bool(theirs) and (ours.startswith(theirs) or theirs.startswith(ours))


@pytest.mark.parametrize("case", CRD_CASES, ids=[case.id for case in CRD_CASES])
def test_server_rejects_what_karpenters_crds_reject(control_plane: ControlPlane, case: Case) -> None:
    status, answer = dry_run_create(control_plane, case.manifest)
    assert _rejected(status, answer), f"the API server answered {status}: {answer}"
    fields = _fields(answer)
    assert any(_related(case.path, field) for field in fields), (case.path, answer["message"])


@pytest.mark.parametrize("case", MODEL_ONLY_CASES, ids=[case.id for case in MODEL_ONLY_CASES])
def test_server_accepts_what_only_the_models_reject(control_plane: ControlPlane, case: Case) -> None:
    status, answer = dry_run_create(control_plane, case.manifest)
    assert status == 201, f"the CRD rejects it after all ({status}): {answer}"


@pytest.mark.parametrize(("file_name", "manifest"), DOCUMENTS, ids=IDS)
def test_server_accepts_karpenters_examples(control_plane: ControlPlane, file_name: str,
                                            manifest: dict[str, Any]) -> None:
    status, answer = dry_run_create(control_plane, manifest)
    invalid_path = KNOWN_INVALID.get((file_name, manifest["kind"]))
    if invalid_path:  # upstream's own CRD rejects this one example (see test_api_examples.py)
        assert _rejected(status, answer) and any(_related(invalid_path, f) for f in _fields(answer)), answer
        return
    assert status == 201, f"{file_name}: the API server answered {status}: {answer}"


def test_every_example_file_was_sent() -> None:
    assert len({name for name, _ in DOCUMENTS}) == 22
