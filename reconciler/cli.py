"""Command line: ``python -m reconciler {simulate,crds,...}``.

Exit codes: 0 success, 2 invalid input (one line on stderr naming what is wrong),
3 ``plan --fail-on-pending`` found pods that would stay pending.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

EXIT_OK = 0
EXIT_INVALID = 2


def _simulate(args: argparse.Namespace) -> int:
    from reconciler.sim.report import render_text, write_result
    from reconciler.sim.runner import ScenarioError, run_scenario_file

    try:
        result = run_scenario_file(args.scenario)
    except ScenarioError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_INVALID
    write_result(result, json_stdout=args.json, out_path=args.out)
    if not args.json:
        sys.stdout.write(render_text(result))
    return EXIT_OK


def _crds(args: argparse.Namespace) -> int:
    from reconciler.api.crds import crds_yaml

    sys.stdout.write(crds_yaml())
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reconciler",
        description="Adze: Karpenter-compatible node autoscaling for EKS (live controller and offline simulator).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    simulate = commands.add_parser("simulate", help="run a scenario through the real engine against a simulated cloud")
    simulate.add_argument("scenario", help="scenario YAML file (see scenario-format.md)")
    simulate.add_argument("--json", action="store_true", help="print only the result document on stdout")
    simulate.add_argument("--out", metavar="RESULT.json", help="also write the result document to this file")
    simulate.set_defaults(handler=_simulate)

    crds = commands.add_parser("crds", help="print the CustomResourceDefinitions (NodePool, NodeClaim, EC2NodeClass)")
    crds.set_defaults(handler=_crds)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
