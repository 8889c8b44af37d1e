"""Shape checks name the exact failing field, on the fast paths for maps and lists of scalars too."""

from __future__ import annotations

import pytest

from reconciler.model.meta import ManifestError
from reconciler.model.shape import check_manifest_shape


def _pod(**metadata: object) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **metadata}, "spec": {"containers": []}}


@pytest.mark.parametrize(("metadata", "message"), [
    ({"labels": {"app": "x", "team": ["a"]}}, r"pod\.metadata\.labels\.team: expected a string or number, got a list"),
    ({"labels": {"app": None, 7: "x"}}, r"pod\.metadata\.labels: keys must be strings, got int 7"),
    ({"finalizers": ["a", None, 3]}, r"pod\.metadata\.finalizers\[2\]: expected a string, got int 3"),
    ({"finalizers": ["a", True]}, r"pod\.metadata\.finalizers\[1\]: expected a string, got a boolean"),
])
def test_a_wrong_scalar_in_a_map_or_list_is_named(metadata: dict, message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        check_manifest_shape(_pod(**metadata), "pod")


def test_scalars_of_every_accepted_type_pass() -> None:
    check_manifest_shape(_pod(labels={"a": "x", "b": 1, "c": 1.5, "d": True, "e": None}, finalizers=["f"]), "pod")
    pod = _pod()
    pod["spec"] = {"priority": 2**31 - 1, "containers": [{"ports": [{"containerPort": 80}]}]}
    check_manifest_shape(pod, "pod")
    pod["spec"]["priority"] = 2**31
    with pytest.raises(ManifestError, match=r"pod\.spec\.priority: 2147483648 is above the maximum"):
        check_manifest_shape(pod, "pod")
