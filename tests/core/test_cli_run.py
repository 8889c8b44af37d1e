from __future__ import annotations

import pytest

from reconciler.cli import main


def test_run_refuses_to_start_without_cluster_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CLUSTER_NAME", raising=False)
    assert main(["run", "--cloud", "simulated"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == ["error: CLUSTER_NAME is not set (the EKS cluster this reconciler manages)"]


def test_run_hands_its_own_options_to_the_controller(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--help"])
    assert exit_info.value.code == 0
    assert "python -m reconciler run" in capsys.readouterr().out
