"""Schema validation (and CRD defaulting) of every object written to the fake API server.

Core kinds are checked with ``kubernetes-validate`` (the upstream OpenAPI schemas, strict:
unknown fields are errors). Our CRD kinds go through ``reconciler.api.crd_validation``
against ``reconciler.api.crds.generate_crds()``: structural defaulting, strict schema (a
real API server would silently prune unknown fields, which hides bugs) and CEL rules,
including transition rules against the stored object on updates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import kubernetes_validate

CRD_GROUPS = frozenset({"karpenter.sh", "karpenter.k8s.aws"})


def _json_path(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".") or "<root>"


def is_custom(manifest: Mapping[str, Any]) -> bool:
    return str(manifest.get("apiVersion", "")).rpartition("/")[0] in CRD_GROUPS


class SchemaValidator:
    """``check(manifest, old)`` returns an error naming the field path, or ``None`` when valid."""

    def __init__(self, kubernetes_version: str = "1.33") -> None:
        self.kubernetes_version = kubernetes_version
        self._crds: list[dict[str, Any]] | None = None
        self.crd_schemas_missing_reason = ""

    def check(self, manifest: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> str | None:
        problems = self.problems(manifest, old)
        if not problems:
            return None
        kind = str(manifest.get("kind", ""))
        name = (manifest.get("metadata") or {}).get("name", "?")
        return f"{kind} {name}: {'; '.join(problems)}"

    def problems(self, manifest: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[str]:
        """Each problem as ``field.path: message`` (empty when valid)."""
        if is_custom(manifest):
            crds = self._load_crds()
            if crds is None:
                return []  # reported once through ``crd_schemas_missing_reason``
            from reconciler.api.crd_validation import validate

            return list(validate(manifest, crds, old))
        try:
            kubernetes_validate.validate(dict(manifest), self.kubernetes_version, strict=True)
        except kubernetes_validate.ValidationError as error:
            return [f"{_json_path(error.absolute_path)}: {error.message}"]
        except kubernetes_validate.SchemaNotFoundError as error:
            return [f"<root>: {error.message}"]
        return []

    def default(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """The object with its CRD's structural defaults applied, as the API server stores it."""
        if not is_custom(manifest):
            return manifest
        crds = self._load_crds()
        if crds is None:
            return manifest
        from reconciler.api.crd_validation import apply_defaults, crd_schema, find_crd

        crd = find_crd(manifest, crds)
        return apply_defaults(crd_schema(crd), manifest) if crd is not None else manifest

    def _load_crds(self) -> list[dict[str, Any]] | None:
        if self._crds is not None:
            return self._crds
        if self.crd_schemas_missing_reason:
            return None
        try:
            from reconciler.api.crd_validation import validate  # noqa: F401
            from reconciler.api.crds import generate_crds
        except ImportError as error:
            self.crd_schemas_missing_reason = f"reconciler.api CRD schemas are not available ({error})"
            return None
        self._crds = generate_crds()
        return self._crds
