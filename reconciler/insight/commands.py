"""The ``snapshot``, ``plan``, ``explain``, ``status`` commands and ``simulate --report`` (CLI adapters).

This is the I/O edge: it reads files, the cluster (through ``KubeAPI``), AWS (``--catalog live``)
and the wall clock (the time a live snapshot is taken). Exit codes: 0 ok, 2 invalid input (one
line on stderr naming the file/key path), 3 ``plan --fail-on-pending`` found pods left pending,
1 the cluster or AWS could not be read.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler import yamlio
from reconciler.insight.catalog import catalog_from_instance_types, fetch_live_instance_types, preset_catalog
from reconciler.insight.errors import InsightError
from reconciler.insight.progress import Progress
from reconciler.insight.snapshot import collect_live, observed_region, observed_zones, sanitize_objects
from reconciler.insight.sources import Snapshot, load_nodepools_files, load_snapshot, load_stack_file
from reconciler.model.meta import format_time

if TYPE_CHECKING:
    from reconciler.sim.scenario import Scenario

EXIT_OK, EXIT_UNAVAILABLE, EXIT_INVALID, EXIT_PENDING, EXIT_UNSETTLED = 0, 1, 2, 3, 4


class UnavailableError(RuntimeError):
    """The cluster or AWS could not be read (not the user's input)."""


def fail(message: str, code: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def guarded(handler: Any) -> Any:
    """Map the insight errors to exit codes with one line on stderr."""

    def run(args: argparse.Namespace) -> int:
        from reconciler.sim.scenario import ScenarioError

        try:
            return int(handler(args))
        except (InsightError, ScenarioError) as err:
            return fail(str(err), EXIT_INVALID)
        except UnavailableError as err:
            return fail(str(err), EXIT_UNAVAILABLE)

    return run


# -- inputs ----------------------------------------------------------------------------------------


def resolve_catalog(option: str | None, objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``--catalog``: None keeps the snapshot's own catalog (or the preset for a kubectl dump)."""
    if option in (None, ""):
        return None
    if option == "preset":
        return preset_catalog(observed_zones(objects), observed_region(objects))
    if option == "live":
        region = observed_region(objects)
        if not region:
            raise InsightError("--catalog live: no node has a topology.kubernetes.io/region label")
        return catalog_from_instance_types(asyncio.run(fetch_live_instance_types(region)), region)
    raise InsightError(f"--catalog: {option!r} must be preset or live")


async def _live_objects(kubeconfig: str | None, context: str | None) -> list[dict[str, Any]]:
    from reconciler.kube.api import ApiError
    from reconciler.kube.live import ConfigError, LiveKube

    try:
        kube = await LiveKube.from_environment(kubeconfig, context)
    except ConfigError as err:
        raise InsightError(f"--kubeconfig: {err}") from None
    try:
        return await collect_live(kube)
    except ApiError as err:
        raise UnavailableError(f"reading the cluster failed: {err}") from None
    finally:
        await kube.close()


def live_snapshot(args: argparse.Namespace) -> Snapshot:
    objects, dropped = sanitize_objects(asyncio.run(_live_objects(args.kubeconfig, args.context)))
    catalog = resolve_catalog(getattr(args, "catalog", None) or "preset", objects)
    name = f"snapshot-{args.context}" if args.context else "snapshot"
    document = snapshot_doc(objects, name, catalog or {}, args.context or "the current kubeconfig context")
    return Snapshot(document, "live cluster", dropped)


def snapshot_doc(
    objects: list[dict[str, Any]], name: str, catalog: dict[str, Any], source: str
) -> dict[str, Any]:
    from reconciler.insight.snapshot import snapshot_document

    taken_at = datetime.now(UTC).replace(microsecond=0)
    return snapshot_document(objects, taken_at=taken_at, name=name, catalog=catalog, source=source)


def with_price_file(catalog: Mapping[str, Any], path: str | None) -> dict[str, Any]:
    """``--prices FILE``: the catalogue section with the file's prices over its own (bundled or live)."""
    if not path:
        return dict(catalog)
    from reconciler.cloud.pricefile import PriceFileError, load_price_file

    try:
        return {**catalog, "prices": load_price_file(path)}
    except PriceFileError as err:
        raise InsightError(f"--prices {err}") from None


def scenario_with_catalog(scenario: Scenario, option: str | None, prices: str | None) -> Scenario:
    """``simulate --catalog live`` / ``--prices``: the scenario with EC2's types and prices for its region
    (restricted to its zones), and/or a user price file over them."""
    from reconciler.sim.catalog import preset_region

    catalog: dict[str, Any] = dict(scenario.catalog)
    if option == "live":
        region = preset_region(catalog) or str(catalog.get("region") or "")
        if not region:
            raise InsightError("--catalog live: the scenario's catalog names no region (catalog.region or preset)")
        zones = set(catalog.get("zones") or ())
        types = asyncio.run(fetch_live_instance_types(region))
        if zones:
            types = [
                dataclasses.replace(t, offerings=tuple(o for o in t.offerings if o.zone in zones)) for t in types
            ]
        catalog = catalog_from_instance_types(types, region)
    elif option not in (None, ""):
        raise InsightError(f"--catalog: {option!r} must be live")
    catalog = with_price_file(catalog, prices)
    rebuilt = dataclasses.replace(scenario, catalog=catalog)
    from reconciler.sim.catalog import build_catalog

    build_catalog(rebuilt.catalog)  # a price file matching nothing is reported now, in one line
    return rebuilt


def get_snapshot(args: argparse.Namespace) -> Snapshot:
    """``--snapshot FILE`` (a snapshot or kubectl dump) or, without it, the live cluster."""
    if getattr(args, "snapshot", None):
        snapshot = load_snapshot(args.snapshot)  # read and validated once, whatever catalogue it is priced with
        catalog = resolve_catalog(getattr(args, "catalog", None), snapshot.objects)
        if catalog is not None:
            snapshot = snapshot.with_catalog(catalog)
    else:
        snapshot = live_snapshot(args)
    if getattr(args, "prices", None):
        snapshot = snapshot.with_catalog(with_price_file(snapshot.document["catalog"], args.prices))
    if getattr(args, "clock", None):
        snapshot = snapshot.at(args.clock)
    return snapshot


# -- commands --------------------------------------------------------------------------------------


def cmd_snapshot(args: argparse.Namespace) -> int:
    if args.scenario:
        from reconciler.insight.snapshot import simulated_snapshot
        from reconciler.sim.scenario import load_scenario_file

        snapshot = Snapshot(asyncio.run(simulated_snapshot(load_scenario_file(args.scenario))), args.scenario)
        catalog = resolve_catalog(args.catalog, snapshot.objects)
        document = dict(snapshot.document) if catalog is None else {**snapshot.document, "catalog": catalog}
    elif args.source:
        snapshot = load_snapshot(args.source)
        catalog = resolve_catalog(args.catalog, snapshot.objects)
        document = dict(snapshot.document) if catalog is None else {**snapshot.document, "catalog": catalog}
    else:
        snapshot = live_snapshot(args)
        document = snapshot.document
    if args.prices:
        document = {**document, "catalog": with_price_file(document.get("catalog") or {}, args.prices)}
        Snapshot(document, snapshot.source).scenario()
    preset = document.get("catalog", {}).get("preset")
    if preset:
        from reconciler.cloud.aws.preset import load_catalog

        bundled = load_catalog(str(preset).removeprefix("aws-"))
        if bundled.prices_estimated:
            print(f"warning: {bundled.on_demand_source}; use --catalog live or --prices FILE for real prices",
                  file=sys.stderr)
    if snapshot.dropped:
        dropped = ", ".join(f"{count} {kind}" for kind, count in snapshot.dropped.items())
        print(f"snapshot: left out {dropped}", file=sys.stderr)
    # `-o x.json` writes JSON, which loads several times faster than YAML for large clusters.
    if args.out and str(args.out).endswith(".json"):
        text = json.dumps(document, indent=1, allow_nan=False) + "\n"
    else:
        text = yamlio.safe_dump(document, sort_keys=False, width=120)
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _proposed(args: argparse.Namespace) -> Any:
    if (args.nodepools or args.remove) and args.stack:
        raise InsightError("--nodepools/--remove and --stack: give one source of proposed NodePools, not both")
    if args.replace_all and not args.nodepools:
        raise InsightError("--replace-all: needs --nodepools (the complete set of NodePools)")
    if args.nodepools or args.remove:
        return load_nodepools_files(args.nodepools, complete=args.replace_all, removed=args.remove)
    if args.stack:
        path = Path(args.stack)
        if not path.exists() and "/" not in args.stack and not args.stack.endswith(".yaml"):
            path = Path(f"Pulumi.{args.stack}.yaml")  # a stack name: its settings file in the project
        return load_stack_file(path)
    raise InsightError("--nodepools, --remove or --stack: required (the proposed NodePools)")


def cmd_plan(args: argparse.Namespace) -> int:
    from reconciler.insight.plan.compute import compute_plan
    from reconciler.insight.plan.html import render_plan_html
    from reconciler.insight.plan.render import render_markdown, render_text
    from reconciler.insight.plan.risks import verdict
    from reconciler.model.meta import format_time
    from reconciler.settings import SettingsError, parse_duration

    try:
        horizon = timedelta(seconds=parse_duration(args.horizon, name="--horizon"))
    except SettingsError as err:
        raise InsightError(str(err)) from None
    proposed = _proposed(args)
    progress = Progress("plan")
    progress.update("reading the snapshot", force=True)
    snapshot = get_snapshot(args)
    try:
        snapshot.clock + horizon
    except OverflowError:
        progress.done()
        raise InsightError(
            f"--horizon: {args.horizon} from the snapshot's clock {format_time(snapshot.clock)} runs past "
            "9999-12-31T23:59:59Z, the last time a timestamp can hold"
        ) from None
    try:
        plan = asyncio.run(compute_plan(snapshot, proposed, horizon=horizon, baseline=args.baseline,
                                        frames=bool(args.report), progress=progress.update))
    finally:
        progress.done()
    if args.report:
        Path(args.report).write_text(render_plan_html(plan))
    if args.json:
        sys.stdout.write(json.dumps(plan.as_dict(), indent=2) + "\n")
    elif args.markdown:
        sys.stdout.write(render_markdown(plan))
    else:
        sys.stdout.write(render_text(plan))
    if plan.horizon_reached:
        print(f"plan: {verdict(plan)[1]}", file=sys.stderr)
        return EXIT_UNSETTLED
    if args.fail_on_pending and plan.newly_pending:
        print(f"plan: {len(plan.newly_pending)} pod(s) would be left unschedulable", file=sys.stderr)
        return EXIT_PENDING
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    from reconciler.insight.explain import explain_node, explain_pod
    from reconciler.insight.frames import RecordingSimulation

    progress = Progress("explain")
    progress.update("reading the snapshot" if args.snapshot else "reading the cluster", force=True)
    try:
        snapshot = get_snapshot(args)
        progress.update(f"simulating {len(snapshot.objects)} objects", force=True)
        sim = RecordingSimulation(snapshot.scenario())
        if args.kind == "pod":
            result = asyncio.run(explain_pod(sim, args.name))
        else:
            result = asyncio.run(explain_node(sim, args.name))
    finally:
        progress.done()
    sys.stdout.write(json.dumps(result.as_dict(), indent=2) + "\n" if args.json else result.render())
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from reconciler.insight.frames import RecordingSimulation
    from reconciler.insight.status import NodeFilter, render_status, use_color

    node_filter = NodeFilter(tuple(args.nodepool), tuple(args.capacity_type), args.filter or "")
    color = use_color(sys.stdout, args.color)

    def render(frame: Any, title: str) -> str:
        return render_status(frame, title=title, color=color, sort=args.sort, node_filter=node_filter)

    if args.watch:
        return _watch_status(args, render)
    progress = Progress("status")
    progress.update("reading the snapshot" if args.snapshot else "reading the cluster", force=True)
    try:
        snapshot = get_snapshot(args)
        progress.update(f"placing {len(snapshot.objects)} objects in the simulated cluster", force=True)
        sim = RecordingSimulation(snapshot.scenario(), frames=False)
        asyncio.run(sim.load())
    finally:
        progress.done()
    frame = sim.frames[-1]
    if args.json:
        from reconciler.insight.frames import price_sources, unpriced
        from reconciler.insight.status import SORT_KEYS

        rows = sorted((r for r in frame.nodes if node_filter.keeps(r)), key=SORT_KEYS[args.sort])
        document = {
            "clock": format_time(frame.clock),
            "costPerHour": round(sum(r.price for r in rows), 6),
            "pendingPods": frame.pending,
            "nodes": [row.as_dict() for row in rows],
            "priceSources": price_sources(rows),
            "unpricedNodes": unpriced(rows),
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write(render(frame, f"{snapshot.name} ({snapshot.source})"))
    return EXIT_OK


def _watch_status(args: argparse.Namespace, render: Any) -> int:
    """``status --watch``: the live cluster, redrawn every ``--interval`` seconds."""
    from reconciler.insight.watch import watch

    if args.snapshot or args.json:
        raise InsightError("--watch: redraws a live cluster; it takes neither --snapshot nor --json")
    if args.interval <= 0:
        raise InsightError(f"--interval: {args.interval} must be a positive number of seconds")
    first, _ = sanitize_objects(asyncio.run(_live_objects(args.kubeconfig, args.context)))
    catalog = with_price_file(resolve_catalog(args.catalog or "preset", first) or {}, getattr(args, "prices", None))
    source = args.context or "the current kubeconfig context"
    title = f"{source} (live, every {args.interval:g}s; Ctrl-C to stop)"
    watch(
        lambda: _live_objects(args.kubeconfig, args.context),
        catalog,
        lambda frame: render(frame, title),
        sys.stdout,
        source=source,
        interval=args.interval,
        count=args.count,
        clear=sys.stdout.isatty(),
    )
    return EXIT_OK


def simulate_with_report(
    scenario: Scenario, report_path: str, *, after_step: Any = None, cloud: str = "simulated"
) -> dict[str, Any]:
    """Run a scenario exactly as ``simulate`` does, and also write the HTML report."""
    from reconciler.insight.frames import RecordingSimulation
    from reconciler.insight.html import render_report
    from reconciler.sim.runner import cloud_factory, run_simulation

    scenario_path = scenario.source or scenario.name
    sim = RecordingSimulation(scenario, cloud=cloud_factory(cloud))
    result = asyncio.run(run_simulation(sim, after_step))
    pending = result["steps"][-1]["pending"] if result["steps"] else sim.cluster.pending_reasons()
    html = render_report(
        f"Simulation: {result['scenario']}",
        f"scenario {scenario_path}",
        sim.frames,
        records=result["steps"],
        pending=pending,
    )
    Path(report_path).write_text(html)
    return result


def add_live_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster config)"
    )
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")


def add_clock_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--clock", metavar="RFC3339", help="evaluate at this time instead of the snapshot's (budget windows)"
    )
