"""Malformed input never raises a traceback (issue 19): seeded mutations (one to three at a time) of the
shipped, valid inputs -- scenario files, API objects in them, stack config, SQS bodies, the live
controller's environment -- each end in a one-line error that names what is wrong, or (when the mutation
happens to stay valid) run. Snapshots, kubectl dumps, --nodepools and stack files through the commands
that read them, and binary garbage: test_fuzz_cluster_inputs.py. More than 2,000 inputs per CI run;
ADZE_FUZZ_SCALE multiplies the counts for a longer run."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzz_support import REPO, SCALE, one_line_path_error, run_cli, scenario_seeds
from malformed import ODD_VALUES, deep, mutate_many

from components.config import ConfigError, load_stack_config
from reconciler.interruption.messages import MessageParseError, parse
from reconciler.settings import Settings, SettingsError
from reconciler.sim.runner import run_scenario
from reconciler.sim.scenario import ScenarioError, parse_scenario


@pytest.mark.parametrize("chunk", range(8))
def test_mutated_scenarios_run_or_fail_with_one_path_named_line(chunk: int) -> None:
    seeds = scenario_seeds()
    kinds = {o.get("kind") for _, d in seeds for o in d.get("objects") or []}
    assert len(seeds) >= 10 and {"DaemonSet", "Node", "NodeClaim", "PodDisruptionBudget"} <= kinds
    rng = random.Random(1000 + chunk)
    for index in range(200 * SCALE):
        name, document = seeds[index % len(seeds)]
        mutated, what = mutate_many(document, rng)
        try:
            result = run_scenario(parse_scenario(mutated))
        except ScenarioError as err:
            one_line_path_error(str(err))
            continue
        except Exception as err:  # the assertion this test exists for
            pytest.fail(f"{name} with {what}: {type(err).__name__}: {err}")
        json.dumps(result, allow_nan=False)  # strict JSON: no NaN or Infinity in a result document


BAD_FILES: dict[str, bytes] = {
    "not-utf8": b"name: x\ncatalog: {zones: [\xff\xfe]}\n",
    "scalar": b"42\n",
    "deep": b"objects: " + b"[" * 5000 + b"]" * 5000 + b"\n",
    "alias-bomb": (
        b"name: bomb\ncatalog: {zones: [z1], instanceTypes: []}\n"
        b"a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        b"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
        b"g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\nobjects: [{kind: Pod, apiVersion: v1, "
        b"metadata: {name: p, annotations: {x: *g}}}]\n"
    ),
    "replicas-huge": (
        b"catalog: {zones: [z1], instanceTypes: [{name: t, capacity: {cpu: '2', memory: 2Gi, pods: '5'}, "
        b"offerings: [{capacityType: on-demand, zone: z1, price: 1}]}]}\n"
        b"objects: [{apiVersion: v1, kind: Pod, metadata: {name: p}, replicas: 1e30, spec: {containers: []}}]\n"
    ),
    "nan-price": (
        b"catalog: {zones: [z1], instanceTypes: [{name: t, capacity: {cpu: '2', memory: 2Gi, pods: '5'}, "
        b"offerings: [{capacityType: on-demand, zone: z1, price: .nan}]}]}\nsteps: [{provision: {}}]\n"
    ),
}


def _exits_2_with_one_line(code: int, out: str, err: str) -> None:
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_the_cli_exits_2_with_one_line_for_bad_files(case: str, tmp_path: Path) -> None:
    """Each bad file through the command's ``main`` in this process (a Python start-up per file costs more
    than the check); one of them through a real process below."""
    path = tmp_path / f"{case}.yaml"
    path.write_bytes(BAD_FILES[case])
    _exits_2_with_one_line(*run_cli(["simulate", str(path), "--json"]))


@pytest.mark.slow  # a Python start-up
def test_a_bad_file_through_a_real_process_exits_2_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(BAD_FILES["nan-price"])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "reconciler", "simulate", str(path), "--json"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    _exits_2_with_one_line(done.returncode, done.stdout, done.stderr)


def test_mutated_sqs_bodies_are_parse_errors_or_messages() -> None:
    bodies = [
        {"version": "0", "id": "e1", "detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
         "time": "2026-11-21T12:00:00Z", "detail": {"instance-id": "i-0123456789abcdef0",
                                                    "instance-action": "terminate"}},
        {"version": "0", "id": "e2", "detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2",
         "time": "2026-11-21T12:00:00Z", "detail": {"instance-id": "i-0123456789abcdef0", "state": "stopping"}},
        {"version": "0", "id": "e3", "detail-type": "AWS Health Event", "source": "aws.health",
         "time": "2026-11-21T12:00:00Z", "detail": {"service": "EC2", "eventTypeCategory": "scheduledChange",
                                                    "affectedEntities": [{"entityValue": "i-0123456789abcdef0"}]}},
    ]
    rng = random.Random(7)
    for index in range(400 * SCALE):
        mutated, what = mutate_many(bodies[index % len(bodies)], rng)
        try:
            body = json.dumps(mutated, default=str)
        except RecursionError:
            body = "[" * 3000 + "]" * 3000
        try:
            parse(body)
        except MessageParseError:
            continue
        except Exception as err:
            pytest.fail(f"SQS body with {what}: {type(err).__name__}: {err}")


def _stack_configs() -> list[dict[str, Any]]:
    configs = []
    for stack in sorted(REPO.glob("Pulumi.*.yaml")):
        document = yaml.safe_load(stack.read_text()) or {}
        raw = {key.split(":", 1)[1]: value for key, value in (document.get("config") or {}).items()
               if key.startswith("adze:")}
        if raw:
            configs.append(raw)
    return configs


def test_mutated_stack_config_fails_with_config_paths() -> None:
    configs = _stack_configs()
    assert len(configs) == 3
    rng = random.Random(11)
    for index in range(300 * SCALE):
        mutated, what = mutate_many(configs[index % len(configs)], rng)
        try:
            load_stack_config(mutated)
        except ConfigError as err:
            for problem in err.problems:  # each problem is one line that starts with its config key
                assert problem.path.startswith("adze:") and "\n" not in str(problem), (what, str(problem))
                assert str(problem).startswith(problem.path), (what, str(problem))
        except Exception as err:
            pytest.fail(f"stack config with {what}: {type(err).__name__}: {err}")


ENV_KEYS = ["LOG_LEVEL", "METRICS_PORT", "HEALTH_PROBE_PORT", "AWS_REGION", "CLUSTER_NAME",
            "DISABLE_LEADER_ELECTION", "BATCH_IDLE_DURATION", "BATCH_MAX_DURATION", "FEATURE_GATES",
            "PREFERENCE_POLICY", "MIN_VALUES_POLICY", "REBALANCE_HANDLING", "KUBE_CLIENT_QPS", "KUBE_CLIENT_BURST"]


def test_mutated_environment_settings_fail_naming_the_variable() -> None:
    rng = random.Random(13)
    odd = [str(v) for v in ODD_VALUES if not isinstance(v, float)] + [
        "70000", "-1", "mars-1", "my cluster", "maybe", "LOUD", "1h1x", "SpotToSpotConsolidation=perhaps",
        "8080", "0", "us-gov-west-1", "a" * 300, json.dumps(deep(50))]
    for _ in range(300 * SCALE):
        env = {"CLUSTER_NAME": "dev", "AWS_REGION": "us-east-1"}
        for key in rng.sample(ENV_KEYS, rng.randint(1, 3)):
            env[key] = rng.choice(odd)
        try:
            Settings.from_env(env)
        except SettingsError as err:
            message = str(err)
            assert "\n" not in message and any(message.startswith(k) for k in [*ENV_KEYS, "METRICS_PORT and"]), (
                env, message)
        except Exception as err:
            pytest.fail(f"environment {env}: {type(err).__name__}: {err}")


@pytest.mark.parametrize(("variable", "value"), [
    ("LOG_LEVEL", "loud"), ("METRICS_PORT", "70000"), ("AWS_REGION", "mars-1"), ("CLUSTER_NAME", "my cluster"),
    ("DISABLE_LEADER_ELECTION", "maybe")])
def test_nonsense_settings_are_refused_by_name(variable: str, value: str) -> None:
    with pytest.raises(SettingsError, match=f"^{variable}: "):
        Settings.from_env({"CLUSTER_NAME": "dev", "AWS_REGION": "us-east-1", variable: value})


def test_two_equal_ports_are_refused() -> None:
    with pytest.raises(SettingsError, match="both 9000"):
        Settings.from_env({"CLUSTER_NAME": "dev", "AWS_REGION": "us-east-1", "METRICS_PORT": "9000",
                           "HEALTH_PROBE_PORT": "9000"})
