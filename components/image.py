"""The reconciler image: an ECR repository and a BuildKit build of ``reconciler/Dockerfile``.

Tags are immutable, so each tag names what it was built from: the build context as the builder sees it
(``.dockerignore`` applied) and the target platform (``components.build_context``). A change of either
gives a new tag; unchanged sources keep the same tag and skip the push.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build

from components.build_context import image_tag
from components.common import type_token

KEEP_IMAGES = 30
DOCKERFILE = Path("reconciler") / "Dockerfile"


def image_platform(arm64: bool) -> docker_build.Platform:
    return docker_build.Platform.LINUX_ARM64 if arm64 else docker_build.Platform.LINUX_AMD64


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
        platform = image_platform(args.arm64)
        dockerfile = args.repo_root / DOCKERFILE
        tag = image_tag(args.repo_root, dockerfile, [platform.value])
        image = docker_build.Image(
            f"{name}-image",
            tags=[repository.repository_url.apply(lambda url: f"{url}:{tag}")],
            context=docker_build.BuildContextArgs(location=str(args.repo_root)),
            dockerfile=docker_build.DockerfileArgs(location=str(dockerfile)),
            platforms=[platform],
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
