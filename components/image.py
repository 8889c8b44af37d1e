"""The reconciler image: an ECR repository and a BuildKit build of ``reconciler/Dockerfile``.

Tags are immutable, so each tag names the content it was built from: a hash of the
files that go into the image. Unchanged sources keep the same tag and skip the push.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build

from components.common import type_token

# What the Dockerfile copies from the repository root (its build context).
IMAGE_SOURCES = ("pyproject.toml", "reconciler")
KEEP_IMAGES = 30


def image_source_files(repo_root: Path) -> list[Path]:
    files: list[Path] = []
    for entry in IMAGE_SOURCES:
        path = repo_root / entry
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    return sorted(files)


def source_tag(repo_root: Path, files: Iterable[Path] | None = None) -> str:
    """``src-<hash>`` over relative paths and contents, so a rename or an edit gives a new tag."""
    digest = hashlib.sha256()
    for path in files if files is not None else image_source_files(repo_root):
        digest.update(path.relative_to(repo_root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return f"src-{digest.hexdigest()[:20]}"


def lifecycle_policy(keep: int = KEEP_IMAGES) -> str:
    return json.dumps(
        {
            "rules": [
                {
                    "rulePriority": 1,
                    "description": f"Keep the newest {keep} images",
                    "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": keep},
                    "action": {"type": "expire"},
                }
            ]
        }
    )


@dataclass(slots=True)
class ReconcilerImageArgs:
    repo_root: Path
    arm64: bool = False
    tags: dict[str, str] = field(default_factory=dict)


class ReconcilerImage(pulumi.ComponentResource):
    ref: pulumi.Output[str]
    repository_url: pulumi.Output[str]

    def __init__(self, name: str, args: ReconcilerImageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("ReconcilerImage"), name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        repository = aws.ecr.Repository(
            f"{name}-repo",
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
            image_tag_mutability="IMMUTABLE",
            # Images are rebuilt from source, so destroying the stack may drop them.
            force_delete=True,
            tags=args.tags,
            opts=child,
        )
        aws.ecr.LifecyclePolicy(f"{name}-lifecycle", repository=repository.name, policy=lifecycle_policy(), opts=child)
        token = aws.ecr.get_authorization_token_output(
            registry_id=repository.registry_id, opts=pulumi.InvokeOptions(parent=self)
        )
        tag = source_tag(args.repo_root)
        image = docker_build.Image(
            f"{name}-image",
            tags=[repository.repository_url.apply(lambda url: f"{url}:{tag}")],
            context=docker_build.BuildContextArgs(location=str(args.repo_root)),
            dockerfile=docker_build.DockerfileArgs(location=str(args.repo_root / "reconciler" / "Dockerfile")),
            platforms=[docker_build.Platform.LINUX_ARM64 if args.arm64 else docker_build.Platform.LINUX_AMD64],
            push=True,
            registries=[
                docker_build.RegistryArgs(
                    address=repository.repository_url,
                    username=token.user_name,
                    password=pulumi.Output.secret(token.password),
                )
            ],
            opts=child,
        )
        # tag@digest, so every rebuild rolls the Deployment.
        self.ref = image.ref
        self.repository_url = repository.repository_url
        self.register_outputs({"ref": self.ref, "repository_url": self.repository_url})
