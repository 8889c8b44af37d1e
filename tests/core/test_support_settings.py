"""Feature gates and settings against the support registry: refused by name at start-up, or implemented."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from reconciler.controllers.operator import app as app_module
from reconciler.controllers.operator.app import EXIT_INVALID, App, app_leader, main
from reconciler.observability import configure_logging, get_logger
from reconciler.settings import Settings, SettingsError

TESTS = Path(__file__).resolve().parents[1]
for where in (TESTS / "controllers", TESTS):
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))

BASE = {"CLUSTER_NAME": "c", "AWS_REGION": "us-east-1"}


@pytest.mark.parametrize("gate", ["CapacityBuffer"])
def test_an_unimplemented_gate_stops_start_up_with_one_line(gate: str, capsys: pytest.CaptureFixture[str]) -> None:
    env = {**BASE, "FEATURE_GATES": f"SpotToSpotConsolidation=true,{gate}=true"}
    assert main(["--cloud", "simulated"], env=env) == EXIT_INVALID
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"error: FEATURE_GATES: {gate}=true is not supported by Adze: ")


def test_implemented_gates_and_upstream_defaults_start() -> None:
    settings = Settings.from_env({**BASE, "FEATURE_GATES": "ReservedCapacity=true,NodeRepair=true,StaticCapacity=true,"
                                                           "NodeOverlay=false,CapacityBuffer=false"})
    assert settings.gate("NodeRepair") and settings.gate("StaticCapacity")


def test_a_scenario_turning_on_an_unimplemented_gate_fails_with_one_line(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from reconciler.cli import main as cli

    scenario = tmp_path / "s.yaml"
    scenario.write_text("settings: {featureGates: {CapacityBuffer: true}}\ncatalog: {preset: aws-us-east-1}\n")
    assert cli(["simulate", str(scenario)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("settings.featureGates: CapacityBuffer=true is not supported by Adze: CapacityBuffer is "
                        "not supported by Adze (no CapacityBuffer CRD or buffer controller): no buffer capacity is "
                        "provisioned")


@pytest.mark.parametrize(("var", "value"), [("ENABLE_PROFILING", "true"), ("LOG_OUTPUT_PATHS", "/var/log/k.log"),
                                            ("ENABLE_ZONAL_SHIFT", "true"), ("IGNORE_DRA_REQUESTS", "false"),
                                            ("AMI_REFRESH_INTERVAL", "5m")])
def test_a_setting_adze_does_not_honour_stops_start_up_naming_it(var: str, value: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--cloud", "simulated"], env={**BASE, var: value}) == EXIT_INVALID
    err = capsys.readouterr().err
    assert err.startswith(f"error: {var}={value} is not supported by Adze: ") and err.count("\n") == 1


def test_karpenters_chart_environment_starts_with_warnings_for_defaults_adze_does_not_act_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from test_ctrl_app import KARPENTER_CHART_ENV

    stream = io.StringIO()
    monkeypatch.setattr(app_module, "configure_logging", lambda level: configure_logging(level, stream=stream))
    monkeypatch.setattr(app_module, "_run", _no_run)
    assert main(["--cloud", "simulated"], env={**KARPENTER_CHART_ENV, "AWS_REGION": "us-east-1"}) == 0
    warnings = [json.loads(line)["detail"] for line in stream.getvalue().splitlines()
                if "setting not implemented" in line]
    assert any(w.startswith("EKS_CONTROL_PLANE=false (Karpenter's default) is accepted, but") for w in warnings)
    assert not any(w.startswith("DISABLE_DRY_RUN") for w in warnings)  # dry runs are implemented
    assert not any("ReservedCapacity" in w for w in warnings)  # on by default, and implemented


async def _no_run(*_: Any) -> int:
    return 0


async def test_disable_leader_election_runs_without_a_lease() -> None:
    from ctrl_harness import wait_for
    from ctrl_objects import catalog, fast_settings, fast_timings

    from reconciler.cloud.sim.provider import SimulatedCloud
    from reconciler.controllers.runtime.context import SystemClock
    from reconciler.kube.api import LEASE
    from reconciler.kube.memory import MemoryKube

    settings = Settings.from_env({**BASE, "DISABLE_LEADER_ELECTION": "true"})
    assert app_leader(settings, {}) is None
    assert app_leader(Settings.from_env(BASE), {"HOSTNAME": "a"}) is not None
    clock = SystemClock()
    kube = MemoryKube(clock=clock.now)
    app = App(fast_settings(leader_elect=False), kube, SimulatedCloud(catalog(), clock=clock.now),
              leader=app_leader(settings, {}), timings=fast_timings(), clock=clock, serve=False)
    stop = asyncio.Event()
    running = asyncio.create_task(app.run(stop))

    async def leading() -> bool:
        return app.reconciler is not None and app.reconciler.ready.is_set()

    assert await wait_for(leading)
    assert kube.objects(LEASE) == []  # the controllers run without campaigning
    stop.set()
    assert await running == 0


def test_log_level_filters_log_lines() -> None:
    stream = io.StringIO()
    configure_logging(Settings.from_env({**BASE, "LOG_LEVEL": "error"}).log_level, stream=stream)
    get_logger("t").info("hidden")
    get_logger("t").error("shown")
    configure_logging(Settings.from_env({**BASE, "LOG_LEVEL": "debug"}).log_level, stream=stream)
    get_logger("t").debug("detail")
    messages = [json.loads(line)["message"] for line in stream.getvalue().splitlines()]
    assert messages == ["shown", "detail"]
    with pytest.raises(SettingsError, match="LOG_LEVEL"):
        Settings.from_env({**BASE, "LOG_LEVEL": "chatty"})


async def test_cluster_endpoint_and_ca_bundle_stand_in_for_describe_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    from reconciler.controllers.operator import cloud_from_settings
    from reconciler.controllers.operator.cloud_from_settings import StartupError, discover_cluster
    from reconciler.kube.memory import MemoryKube

    def unreachable(*_: Any) -> dict[str, Any]:
        raise RuntimeError("eks:DescribeCluster denied")

    monkeypatch.setattr(cloud_from_settings, "_describe_cluster", unreachable)
    env = {**BASE, "CLUSTER_ENDPOINT": "https://api.example", "CLUSTER_CA_BUNDLE": "Q0E="}
    info = await discover_cluster(Settings.from_env(env), env, MemoryKube())
    assert (info.endpoint, info.ca_bundle) == ("https://api.example", "Q0E=")
    with pytest.raises(StartupError, match="set CLUSTER_ENDPOINT and CLUSTER_CA_BUNDLE"):
        await discover_cluster(Settings.from_env(BASE), BASE, MemoryKube())


def test_aws_default_region_names_the_region() -> None:
    assert Settings.from_env({"CLUSTER_NAME": "c", "AWS_DEFAULT_REGION": "eu-west-1"}).aws_region == "eu-west-1"
    assert Settings.from_env({"CLUSTER_NAME": "c", "AWS_DEFAULT_REGION": "eu-west-1",
                              "AWS_REGION": "us-east-2"}).aws_region == "us-east-2"
