"""Image tags from the build context as BuildKit sees it (``.dockerignore`` applied) and the target platform."""

from __future__ import annotations

from pathlib import Path

import pytest
from pulumi_harness import REPO_ROOT, run_stack

from components.build_context import context_files, image_tag, is_ignored, parse_ignore_file

DOCKERFILE = Path("reconciler") / "Dockerfile"


@pytest.mark.parametrize(("path", "ignored"), [
    ("README.md", False),
    ("pyproject.toml", False),
    ("reconciler/cli.py", False),
    ("reconciler/cloud/aws/fleet.py", False),
    ("reconciler/__pycache__/cli.cpython-311.pyc", True),
    ("reconciler/cloud/__pycache__/x.pyc", True),
    ("tests/conftest.py", True),
    ("Pulumi.dev.yaml", True),
    ("components/image.py", True),
    (".git/HEAD", True),
    ("docs/deploying.md", True),
])
def test_the_repository_ignore_file_keeps_the_package_and_drops_the_rest(path: str, ignored: bool) -> None:
    patterns = parse_ignore_file((REPO_ROOT / ".dockerignore").read_text())
    assert is_ignored(path, patterns) is ignored


def test_docker_pattern_rules() -> None:
    patterns = parse_ignore_file("""
        # comment
        /build
        docs/*.md
        !docs/keep.md
        **/*.log
        a?c
        data/[0-9]*
    """)
    assert is_ignored("build", patterns) and is_ignored("build/x/y", patterns)  # a directory covers its files
    assert not is_ignored("src/build", patterns)  # patterns are anchored at the context root
    assert is_ignored("docs/a.md", patterns) and not is_ignored("docs/keep.md", patterns)
    assert not is_ignored("docs/sub/a.md", patterns)  # "*" does not cross "/"
    assert is_ignored("x.log", patterns) and is_ignored("a/b/c.log", patterns)  # "**/" also matches nothing
    assert is_ignored("abc", patterns) and not is_ignored("abbc", patterns)
    assert is_ignored("data/7.csv", patterns) and not is_ignored("data/x.csv", patterns)
    last_wins = parse_ignore_file("!keep\n*\n!keep\n")
    assert is_ignored("other", last_wins) and not is_ignored("keep", last_wins)


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def context(tmp_path: Path) -> Path:
    write(tmp_path, ".dockerignore", "*\n!pyproject.toml\n!README.md\n!reconciler/\n**/__pycache__\n")
    write(tmp_path, "reconciler/Dockerfile", "FROM scratch\nCOPY reconciler /r\n")
    write(tmp_path, "reconciler/a.py", "A = 1\n")
    write(tmp_path, "pyproject.toml", "[project]\nname = 'x'\n")
    write(tmp_path, "README.md", "# x\n")
    write(tmp_path, "tests/test_a.py", "def test(): pass\n")
    write(tmp_path, "reconciler/__pycache__/a.cpython-311.pyc", "junk")
    return tmp_path


def tag(context: Path, platform: str = "linux/amd64") -> str:
    return image_tag(context, context / DOCKERFILE, [platform])


def test_the_tag_covers_what_is_sent_and_nothing_else(context: Path) -> None:
    assert [p.relative_to(context).as_posix() for p in context_files(context, context / DOCKERFILE)] == [
        "README.md", "pyproject.toml", "reconciler/Dockerfile", "reconciler/a.py"]
    first = tag(context)
    assert tag(context) == first  # unchanged context: same tag (the push is skipped)
    write(context, "tests/test_a.py", "def test(): assert False\n")
    write(context, "reconciler/__pycache__/a.cpython-311.pyc", "other junk")
    assert tag(context) == first  # what the builder never sees does not matter


@pytest.mark.parametrize("change", ["content", "readme", "new file", "rename", "mode", "dockerfile", "ignore"])
def test_any_change_the_builder_sees_gives_a_new_tag(context: Path, change: str) -> None:
    first = tag(context)
    module = context / "reconciler" / "a.py"
    if change == "content":
        module.write_text("A = 2\n")
    elif change == "readme":
        write(context, "README.md", "# y\n")
    elif change == "new file":
        write(context, "reconciler/b.py", "")
    elif change == "rename":
        module.rename(context / "reconciler" / "b.py")
    elif change == "mode":
        module.chmod(0o755)
    elif change == "dockerfile":
        write(context, "reconciler/Dockerfile", "FROM scratch\n")
    else:  # the ignore file now sends the tests too
        write(context, ".dockerignore", "*\n!pyproject.toml\n!README.md\n!reconciler/\n!tests/\n**/__pycache__\n")
    assert tag(context) != first


def test_a_dockerfile_specific_ignore_file_takes_precedence(context: Path) -> None:
    first = tag(context)
    write(context, "reconciler/Dockerfile.dockerignore", "*\n!reconciler/\n**/__pycache__\n")  # no README, pyproject
    assert [p.name for p in context_files(context, context / DOCKERFILE)] == [
        "Dockerfile", "Dockerfile.dockerignore", "a.py"]
    assert tag(context) != first


def every_file_filtered(context: Path) -> list[str]:
    """The files sent, found the slow way: every file under the context, each tested against the ignore file."""
    patterns = parse_ignore_file((context / ".dockerignore").read_text())
    return sorted(relative for relative in (p.relative_to(context).as_posix() for p in context.rglob("*")
                                            if p.is_file() or p.is_symlink()) if not is_ignored(relative, patterns))


def test_ignored_directories_are_skipped_unless_a_file_inside_is_re_included(context: Path) -> None:
    write(context, ".dockerignore", "*\n!pyproject.toml\n!README.md\n!reconciler/\n**/__pycache__\n"
                                    "!docs/keep/*.md\n!assets\n")
    write(context, "docs/keep/a.md", "kept")
    write(context, "docs/keep/b.txt", "dropped")
    write(context, "docs/other/c.md", "dropped")
    write(context, "assets/nested/deep/d.bin", "kept")
    write(context, "assetsx/e.bin", "dropped")
    write(context, ".venv/lib/site.py", "dropped")
    (context / "reconciler" / "link").symlink_to(context / ".venv")  # a link is sent as a link, never followed
    sent = [p.relative_to(context).as_posix() for p in context_files(context, context / DOCKERFILE)]
    assert sent == every_file_filtered(context)
    assert {"docs/keep/a.md", "assets/nested/deep/d.bin", "reconciler/link"} <= set(sent)
    assert not {"docs/keep/b.txt", "docs/other/c.md", "assetsx/e.bin", ".venv/lib/site.py"} & set(sent)


def test_two_platforms_give_two_tags(context: Path) -> None:
    assert tag(context, "linux/amd64") != tag(context, "linux/arm64")


def test_the_stack_tags_its_image_for_its_system_node_architecture() -> None:
    amd64 = run_stack("dev").one("docker-build:index:Image").inputs
    arm64 = run_stack("dev", **{"adze:systemNodeGroup": {"instanceTypes": ["m7g.large"],
                                                          "amiType": "AL2023_ARM_64_STANDARD"}}).one(
        "docker-build:index:Image").inputs
    assert (amd64["platforms"], arm64["platforms"]) == (["linux/amd64"], ["linux/arm64"])
    assert amd64["tags"][0].rsplit(":", 1)[1] != arm64["tags"][0].rsplit(":", 1)[1]
    expected = image_tag(REPO_ROOT, REPO_ROOT / DOCKERFILE, ["linux/amd64"])
    assert amd64["tags"][0].endswith(f":{expected}")
