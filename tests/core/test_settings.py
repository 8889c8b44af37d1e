from __future__ import annotations

import pytest

from reconciler.settings import Settings, SettingsError, format_duration, parse_duration, parse_feature_gates


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


def test_durations() -> None:
    assert parse_duration("1m30s") == 90
    assert parse_duration("500ms") == 0.5
    assert parse_duration("2h") == 7200
    assert format_duration(90) == "1m30s"
    with pytest.raises(SettingsError):
        parse_duration("10d")


def test_feature_gates_from_map() -> None:
    assert parse_feature_gates({"SpotToSpotConsolidation": True})["SpotToSpotConsolidation"] is True
