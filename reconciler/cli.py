"""Command line: ``python -m reconciler {simulate,snapshot,plan,explain,status,crds}``.

Exit codes: 0 success, 2 invalid input (one line on stderr naming what is wrong),
3 ``plan --fail-on-pending`` found pods that would stay pending, 1 the cluster or AWS
could not be read.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from reconciler.collector import tune_for_one_shot_command

EXIT_OK = 0
EXIT_INVALID = 2
PRICES_HELP = (
    "your prices (JSON or CSV: instanceType, capacityType, zone, price per hour), overriding the catalogue's, "
    "bundled or live; every cost then names this file as its source"
)


def _simulate(args: argparse.Namespace) -> int:
    import asyncio
    import itertools

    from reconciler.insight.progress import Progress
    from reconciler.sim.report import render_text, write_result
    from reconciler.sim.runner import ScenarioError, Simulation, cloud_factory, run_simulation
    from reconciler.sim.scenario import load_scenario_file

    progress = Progress("simulate")
    try:
        scenario = load_scenario_file(args.scenario)
        if args.catalog or args.prices:
            from reconciler.insight.commands import scenario_with_catalog

            scenario = scenario_with_catalog(scenario, args.catalog, args.prices)
        total, counter = len(scenario.steps), itertools.count(1)

        def after_step(_step: object, record: dict[str, Any]) -> None:
            done = next(counter)
            progress.update(f"step {done}/{total} ({record['step']}) @ {record['clock']}, "
                            f"{len(record['pending'])} pod(s) pending")

        if args.report:
            from reconciler.insight.commands import simulate_with_report

            result = simulate_with_report(scenario, args.report, after_step=after_step, cloud=args.cloud)
        else:
            sim = Simulation(scenario, cloud=cloud_factory(args.cloud))
            result = asyncio.run(run_simulation(sim, after_step))
    except ScenarioError as err:
        progress.done()
        print(f"error: {err}", file=sys.stderr)
        return EXIT_INVALID
    except Exception as err:  # --catalog live / --prices report one line, as the other commands do
        from reconciler.insight.errors import InsightError

        if not isinstance(err, InsightError):
            raise
        progress.done()
        print(f"error: {err}", file=sys.stderr)
        return EXIT_INVALID
    progress.done()
    write_result(result, json_stdout=args.json, out_path=args.out)
    if not args.json:
        sys.stdout.write(render_text(result, verbose=args.verbose))
    return EXIT_OK


def _crds(args: argparse.Namespace) -> int:
    from reconciler.api.crds import crds_yaml

    sys.stdout.write(crds_yaml())
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reconciler",
        description="Adze: Karpenter-compatible node autoscaling for EKS "
        "(live controller and offline simulator).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    simulate = commands.add_parser(
        "simulate", help="run a scenario through the real engine against a simulated cloud"
    )
    simulate.add_argument("scenario", help="scenario YAML file (see docs/scenario-format.md)")
    simulate.add_argument("--json", action="store_true", help="print only the result document on stdout")
    simulate.add_argument("--out", metavar="RESULT.json", help="also write the result document to this file")
    simulate.add_argument("--report", metavar="REPORT.html", help="also write a self-contained HTML report")
    simulate.add_argument(
        "--cloud",
        choices=("simulated", "moto"),
        default="simulated",
        help="simulated (default) or moto: the real AWS provider (launch templates, CreateFleet, tags, "
        "termination) against an in-process moto seeded from the scenario",
    )
    simulate.add_argument(
        "--catalog",
        choices=("live",),
        help="live: replace the scenario's catalogue with EC2's types and Pricing API / spot history prices "
        "for its region",
    )
    simulate.add_argument("--prices", metavar="FILE", help=PRICES_HELP)
    simulate.add_argument("--verbose", action="store_true",
                          help="list every launch, binding, disruption and blocker (default: large steps summarised)")
    simulate.set_defaults(handler=_simulate)
    _add_insight_commands(commands)

    crds = commands.add_parser(
        "crds", help="print the CustomResourceDefinitions (NodePool, NodeClaim, EC2NodeClass, NodeOverlay)"
    )
    crds.set_defaults(handler=_crds)
    return parser


def _add_insight_commands(commands: argparse._SubParsersAction) -> None:
    from reconciler.insight import commands as insight

    catalog_help = (
        "instance types and prices: preset (the bundled catalogue of the nodes' region) or live "
        "(EC2 + Pricing API + spot price history)"
    )
    snapshot = commands.add_parser(
        "snapshot", help="capture the objects the engine needs from a cluster as a scenario document"
    )
    insight.add_live_options(snapshot)
    snapshot.add_argument(
        "--from",
        dest="source",
        metavar="FILE",
        help="convert `kubectl get ... -A -o yaml` output instead of reading the cluster",
    )
    snapshot.add_argument(
        "--scenario",
        metavar="SCENARIO.yaml",
        help="run a scenario in the simulator and snapshot the cluster it leaves (demos, tests)",
    )
    snapshot.add_argument("--catalog", choices=("preset", "live"), help=catalog_help)
    snapshot.add_argument("--prices", metavar="FILE", help=PRICES_HELP)
    snapshot.add_argument("-o", "--out", metavar="SNAPSHOT.yaml", help="write here instead of stdout")
    snapshot.set_defaults(handler=insight.guarded(insight.cmd_snapshot))

    plan = commands.add_parser(
        "plan", help="preview a NodePool change: drift, consolidation, cost, stranded pods"
    )
    plan.add_argument("--snapshot", metavar="S", help="snapshot or kubectl dump (default: the live cluster)")
    plan.add_argument(
        "--nodepools",
        metavar="FILE|DIR",
        action="append",
        default=[],
        help="proposed NodePool/EC2NodeClass/NodeOverlay manifests, merged over the cluster's (repeatable; a "
        "directory means its *.yaml files)",
    )
    plan.add_argument(
        "--replace-all",
        action="store_true",
        help="the --nodepools set is complete: NodePools of the cluster not in it are removed (NodeOverlays "
        "are still merged; --remove nodeoverlay/NAME drops one)",
    )
    plan.add_argument(
        "--remove", metavar="[KIND/]NAME", action="append", default=[],
        help="remove this NodePool or NodeOverlay (repeatable; nodepool/NAME or nodeoverlay/NAME when the "
        "cluster has both of that name)",
    )
    plan.add_argument(
        "--stack",
        metavar="Pulumi.<stack>.yaml",
        help="take the proposed NodePools from a Pulumi stack file (or stack name)",
    )
    plan.add_argument("--catalog", choices=("preset", "live"), help=catalog_help)
    plan.add_argument("--prices", metavar="FILE", help=PRICES_HELP)
    plan.add_argument(
        "--horizon", default="168h", help="how far ahead to simulate waiting budgets (default 168h)"
    )
    plan.add_argument(
        "--baseline",
        action="store_true",
        help="also run the current NodePools to stability (separates the change from pending consolidation)",
    )
    output = plan.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the plan as JSON")
    output.add_argument("--markdown", action="store_true", help="print Markdown for a pull-request comment")
    plan.add_argument("--report", metavar="REPORT.html", help="also write a self-contained HTML report")
    plan.add_argument(
        "--fail-on-pending", action="store_true", help="exit 3 when the change would leave pods unschedulable"
    )
    insight.add_live_options(plan)
    insight.add_clock_option(plan)
    plan.set_defaults(handler=insight.guarded(insight.cmd_plan))

    explain = commands.add_parser("explain", help="why a pod is pending / why a node is or is not disrupted")
    explain.add_argument("kind", choices=("pod", "node"))
    explain.add_argument("name", help="NAMESPACE/NAME for a pod, the Node (or NodeClaim) name for a node")
    explain.add_argument(
        "--snapshot", metavar="S", help="snapshot or kubectl dump (default: the live cluster)"
    )
    explain.add_argument("--catalog", choices=("preset", "live"), help=catalog_help)
    explain.add_argument("--prices", metavar="FILE", help=PRICES_HELP)
    explain.add_argument("--json", action="store_true", help="print the explanation as JSON")
    insight.add_live_options(explain)
    insight.add_clock_option(explain)
    explain.set_defaults(handler=insight.guarded(insight.cmd_explain))

    status = commands.add_parser("status", help="eks-node-viewer-style view of nodes, utilisation and cost")
    status.add_argument(
        "--snapshot", metavar="S", help="snapshot or kubectl dump (default: the live cluster)"
    )
    status.add_argument("--catalog", choices=("preset", "live"), help=catalog_help)
    status.add_argument("--prices", metavar="FILE", help=PRICES_HELP)
    status.add_argument("--json", action="store_true", help="print the node table as JSON")
    status.add_argument("--sort", default="pool", choices=("pool", "name", "cpu", "memory", "price", "pods", "type",
                                                          "zone", "gpu"),
                        help="node order (default: NodePool, then name; cpu/memory/price/pods/gpu: highest first)")
    status.add_argument("--nodepool", action="append", default=[], metavar="NAME",
                        help="only nodes of this NodePool ('(unmanaged)' for the rest; repeatable)")
    status.add_argument("--capacity-type", action="append", default=[], choices=("spot", "on-demand", "reserved"),
                        help="only nodes of this capacity type (repeatable)")
    status.add_argument("--filter", metavar="TEXT", help="only nodes whose name, pool, type, zone or arch has TEXT")
    status.add_argument("--color", default="auto", choices=("auto", "always", "never"),
                        help="ANSI colours (auto: on a terminal, unless NO_COLOR is set)")
    status.add_argument("--watch", action="store_true",
                        help="redraw the live cluster every --interval seconds until interrupted")
    status.add_argument("--interval", type=float, default=5.0, help="seconds between --watch refreshes (default 5)")
    status.add_argument("--count", type=int, metavar="N", help="stop --watch after N refreshes")
    insight.add_live_options(status)
    insight.add_clock_option(status)
    status.set_defaults(handler=insight.guarded(insight.cmd_status))

    # Listed for --help; main() hands everything after "run" to the controller's own parser.
    commands.add_parser("run", add_help=False, help="run the live reconciler (python -m reconciler run --help)")


def stop_on_signals() -> None:
    """SIGINT/SIGTERM end an offline command within a second, exit 130/143 with one line.

    These commands only read (a snapshot, a scenario, the cluster) and write their output at the end,
    so stopping at once loses nothing; a handler is needed because the engine's loops and asyncio would
    otherwise absorb or delay KeyboardInterrupt (plan kept running minutes after Ctrl-C)."""

    def stop(signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        os.write(2, f"\ninterrupted by {name}: stopped before writing any result\n".encode())
        os._exit(128 + signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["run"]:
        # The live reconciler stops gracefully on its own handlers (lease release); until they exist, an
        # interrupt during its imports ends it with one line instead of a traceback.
        try:
            from reconciler.controllers.operator.app import main as run_main
        except KeyboardInterrupt:
            print("interrupted by SIGINT during start-up", file=sys.stderr)
            return 130
        return run_main(arguments[1:])
    # Before the parser: building it imports the engine, which takes long enough to be interrupted.
    stop_on_signals()
    args = build_parser().parse_args(arguments)
    tune_for_one_shot_command()
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
