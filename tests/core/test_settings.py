from __future__ import annotations

import pytest

from reconciler.settings import Settings, SettingsError, parse_duration, parse_feature_gates


def test_defaults_match_karpenter() -> None:
    settings = Settings()
    assert settings.batch_idle_duration == 1.0
    assert settings.batch_max_duration == 10.0
    assert settings.preference_policy == "Respect"
    assert settings.min_values_policy == "Strict"
    assert not settings.gate("SpotToSpotConsolidation")
    assert settings.gate("ReservedCapacity")


def test_from_env_reads_karpenter_names() -> None:
    settings = Settings.from_env(
        {
            "CLUSTER_NAME": "prod",
            "INTERRUPTION_QUEUE": "prod-q",
            "BATCH_IDLE_DURATION": "2s",
            "BATCH_MAX_DURATION": "1m",
            "FEATURE_GATES": "SpotToSpotConsolidation=true,NodeRepair=false",
            "AWS_REGION": "eu-west-1",
        }
    )
    assert settings.cluster_name == "prod"
    assert settings.interruption_queue == "prod-q"
    assert settings.batch_idle_duration == 2.0
    assert settings.batch_max_duration == 60.0
    assert settings.gate("SpotToSpotConsolidation")
    assert settings.aws_region == "eu-west-1"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"BATCH_IDLE_DURATION": "soon"}, "BATCH_IDLE_DURATION"),
        ({"FEATURE_GATES": "Bogus=true"}, "unknown feature gate 'Bogus'"),
        ({"FEATURE_GATES": "SpotToSpotConsolidation"}, "must look like Gate=true"),
        ({"PREFERENCE_POLICY": "Sometimes"}, "PREFERENCE_POLICY"),
        ({"BATCH_IDLE_DURATION": "20s", "BATCH_MAX_DURATION": "10s"}, "must not exceed"),
        ({"METRICS_PORT": "http"}, "METRICS_PORT"),
    ],
)
def test_from_env_rejects_bad_values(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


def test_duration_settings_use_the_go_parser_and_name_the_setting() -> None:
    assert parse_duration("1m30s") == 90
    assert parse_duration("500ms") == 0.5
    assert parse_duration("2h") == 7200
    assert parse_duration(" 1.5h ") == 5400  # env values: surrounding spaces ignored
    assert parse_duration(".5s") == 0.5  # Go syntax the old settings parser refused
    with pytest.raises(SettingsError, match=r"^BATCH_IDLE_DURATION: '10d' is not a duration: unknown unit 'd'"):
        parse_duration("10d", name="BATCH_IDLE_DURATION")
    with pytest.raises(SettingsError, match=r"^BATCH_MAX_DURATION: '-1s' must not be negative"):
        parse_duration("-1s", name="BATCH_MAX_DURATION")


def test_rebalance_handling_is_a_validated_setting() -> None:
    assert Settings.from_env({}).rebalance_handling == "event"  # Karpenter's behaviour by default
    assert Settings.from_env({"REBALANCE_HANDLING": "drain"}).rebalance_handling == "drain"
    with pytest.raises(SettingsError, match=r"^REBALANCE_HANDLING: 'cordon' must be one of event, drain$"):
        Settings.from_env({"REBALANCE_HANDLING": "cordon"})
    with pytest.raises(SettingsError, match="REBALANCE_HANDLING"):
        Settings(rebalance_handling="sometimes").validate()


def test_watch_progress_deadline_is_a_duration_setting() -> None:
    assert Settings.from_env({}).watch_progress_deadline == 120.0  # twice the API server's bookmark interval
    assert Settings.from_env({"WATCH_PROGRESS_DEADLINE": "45s"}).watch_progress_deadline == 45.0
    with pytest.raises(SettingsError, match=r"^WATCH_PROGRESS_DEADLINE: '0s' must be positive$"):
        Settings.from_env({"WATCH_PROGRESS_DEADLINE": "0s"})
    with pytest.raises(SettingsError, match="WATCH_PROGRESS_DEADLINE: 'soon' is not a duration"):
        Settings.from_env({"WATCH_PROGRESS_DEADLINE": "soon"})


def test_feature_gates_from_map() -> None:
    assert parse_feature_gates({"SpotToSpotConsolidation": True})["SpotToSpotConsolidation"] is True
