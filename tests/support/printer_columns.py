"""What ``kubectl get`` prints for an object: the CRD's additionalPrinterColumns evaluated as kubectl does
(JSONPath with ``\\.``-escaped dots in label keys and ``[?(@.type=="Ready")]`` filters)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jsonpath_ng.ext import parse

from reconciler.api.crds import generate_crds


def _jsonpath(kubectl_path: str) -> str:
    """kubectl's ``.metadata.labels.node\\.kubernetes\\.io/instance-type`` as jsonpath-ng reads it."""
    segments = re.split(r"(?<!\\)\.", kubectl_path.lstrip("."))
    quoted = [f'"{s.replace(chr(92) + ".", ".")}"' if "\\." in s or "/" in s else s for s in segments]
    return "$." + ".".join(quoted)


def printed(kind: str, obj: Mapping[str, Any]) -> dict[str, str]:
    """Column name (upper case, as kubectl heads it) -> the cell kubectl shows ("" when the path finds nothing)."""
    crd = next(c for c in generate_crds() if c["spec"]["names"]["kind"] == kind)
    row = {}
    for column in crd["spec"]["versions"][0]["additionalPrinterColumns"]:
        found = [m.value for m in parse(_jsonpath(column["jsonPath"])).find(obj)]
        row[column["name"].upper()] = ",".join(str(v) for v in found)
    return row
