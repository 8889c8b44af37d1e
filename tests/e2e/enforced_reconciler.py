"""``python -m reconciler run`` with every AWS call authorized against IAM policies first (for the e2e tests).

    ADZE_AUTHZ_POLICIES=policies.json ADZE_AUTHZ_REPORT=report.json python tests/e2e/enforced_reconciler.py [run args]

Every botocore client the process creates (the reconciler's, and the eks client of its start-up discovery) is
attached to ``support.aws_authz.IamEnforcement`` over the policy documents in ``ADZE_AUTHZ_POLICIES`` (a JSON
object: name -> document): a call the policies deny fails as AWS would fail it. On exit the operations called
and every denial are written to ``ADZE_AUTHZ_REPORT``. The endpoint, region and credentials are the AWS SDK's
environment variables (``AWS_ENDPOINT_URL`` pointing at moto).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

import botocore.client  # noqa: E402
from support.aws_authz import AuthorizationModel, AwsState, IamEnforcement  # noqa: E402

from reconciler.cloud.aws.offline import ACCOUNT_ID  # noqa: E402


def install(policies_path: str) -> IamEnforcement:
    env = os.environ
    state = AwsState(env["AWS_ENDPOINT_URL"], env["AWS_REGION"], {
        "aws_access_key_id": env["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"]})
    policies = json.loads(Path(policies_path).read_text())
    guard = IamEnforcement(list(policies.values()), AuthorizationModel(state, ACCOUNT_ID))
    create_client = botocore.client.ClientCreator.create_client

    def enforced(self: botocore.client.ClientCreator, *args: object, **kwargs: object) -> object:
        return guard.attach(create_client(self, *args, **kwargs))

    botocore.client.ClientCreator.create_client = enforced  # type: ignore[method-assign]
    return guard


def main() -> int:
    guard = install(os.environ["ADZE_AUTHZ_POLICIES"])
    code = 1
    try:
        from reconciler.cli import main as reconciler_main

        code = reconciler_main(["run", *sys.argv[1:]])
    finally:
        report = {
            "operations": sorted(guard.operations),
            "checks": len(guard.checks),
            "denials": [f"{d.check.describe()} -> {d.decision.outcome}" for d in guard.denials],
        }
        Path(os.environ["ADZE_AUTHZ_REPORT"]).write_text(json.dumps(report, indent=1))
    return code


if __name__ == "__main__":
    sys.exit(main())
