"""Static checks of the reconciler image (no Docker daemon is needed or available)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "reconciler" / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return steps[last_from:]


def package_name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_base_images_are_pinned() -> None:
    images = [args.split()[0] for keyword, args in instructions() if keyword == "FROM"]
    assert images, "no FROM instruction"
    for image in images:
        if "@sha256:" in image:
            continue
        _, _, tag = image.partition(":")
        assert tag and tag != "latest", f"{image}: base image must be pinned to an exact tag or digest"
        assert re.match(r"^\d+\.\d+\.\d+", tag), f"{image}: tag {tag!r} is not an exact version"


def test_runs_as_non_root_65532() -> None:
    users = [args for keyword, args in final_stage() if keyword == "USER"]
    assert users and users[-1] in ("65532", "65532:65532"), f"final USER is {users}"


def test_entrypoint_runs_the_reconciler() -> None:
    entrypoints = [args for keyword, args in final_stage() if keyword == "ENTRYPOINT"]
    assert entrypoints, "no ENTRYPOINT"
    command = json.loads(entrypoints[-1])  # exec form, so signals reach Python (graceful shutdown)
    assert Path(command[0]).name.startswith("python") and command[1:] == ["-m", "reconciler", "run"]


def test_only_runtime_dependencies_are_installed() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    optional = {
        package_name(r) for group in project["project"]["optional-dependencies"].values() for r in group
    }
    runtime = {package_name(r) for r in project["project"]["dependencies"]}
    optional -= runtime
    optional.discard("adze")
    installs = [args for keyword, args in instructions() if keyword == "RUN" and "pip install" in args]
    assert installs, "the image installs nothing"
    for command in installs:
        for segment in re.findall(r"pip install([^&;]*)", command):
            targets = [word for word in segment.split() if not word.startswith("-")]
            assert targets == ["."], f"pip install must install only the package itself, got {targets}"
    assert "[" not in " ".join(installs), "no extras may be installed"
    assert not runtime & {"pytest", "moto", "pulumi", "kubernetes-validate", "hypothesis", "jsonschema"}, (
        "pyproject's runtime dependencies contain test or infrastructure packages"
    )


def test_read_only_root_filesystem_and_multi_arch_friendly() -> None:
    text = DOCKERFILE.read_text()
    env = " ".join(args for keyword, args in final_stage() if keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env, "Python must not try to write bytecode at runtime"
    assert "compileall" in text, "bytecode is compiled at build time instead"
    assert not any(keyword == "VOLUME" for keyword, _ in instructions())
    for arch in ("amd64", "arm64", "x86_64", "aarch64"):
        assert arch not in re.sub(r"(?m)^#.*$", "", text), f"{arch} is hard-coded"
    assert "--platform" not in re.sub(r"(?m)^#.*$", "", text)


@pytest.mark.parametrize("port", ["8080", "8081"])
def test_ports_match_the_chart(port: str) -> None:
    exposed = " ".join(args for keyword, args in final_stage() if keyword == "EXPOSE").split()
    assert port in exposed
