"""The reconciler's Kubernetes identity exactly as the Pulumi program deploys it, as JSON manifests.

    python tests/support/render_rbac.py [STACK]     # default: dev

Runs the whole Pulumi program of ``Pulumi.<STACK>.yaml`` under the unit-test mocks
(``tests/components/pulumi_harness.py``) and prints the ServiceAccount, ClusterRoles, ClusterRoleBindings,
Roles and RoleBindings it registers, with the inputs the program gave them (``components/rbac.py``'s rules,
``components/reconciler.py``'s names, subjects and namespace). A separate process keeps Pulumi's global runtime
out of the caller. ``support.reconciler_process`` applies them to the real control plane.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

_TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_TESTS / "components"))

from pulumi_harness import run_stack  # noqa: E402

KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
API_VERSIONS = {"ServiceAccount": "v1"}


def render(stack: str) -> list[dict[str, Any]]:
    run = run_stack(stack)
    manifests = []
    for kind in KINDS:
        for registration in run.k8s_objects(kind):
            body = {k: v for k, v in registration.inputs.items() if k not in ("apiVersion", "kind")}
            manifests.append({
                "apiVersion": API_VERSIONS.get(kind, "rbac.authorization.k8s.io/v1"),
                "kind": kind,
                **body,
            })
    return manifests


def main(argv: list[str]) -> int:
    stack = argv[0] if argv else "dev"
    json.dump(render(stack), sys.stdout, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
