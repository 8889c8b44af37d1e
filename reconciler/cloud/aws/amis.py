"""AMI resolution: aliases through SSM public parameters, selector terms through DescribeImages.

An alias (``al2023@latest``, ``al2@v20240807``, ``bottlerocket@1.20.0``,
``windows2022@latest``) names one AMI per (architecture, accelerator variant);
each becomes a status entry whose requirements say which instance types may
use it (e.g. the NVIDIA variant only for types with NVIDIA GPUs). Other terms
(``id``, ``name``, ``tags``, ``owner``, ``ssmParameter``) select images
directly and map to instance types by architecture, newest image first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.api.amifamily import ALIAS_FAMILIES, AMIFamily
from reconciler.cloud.aws.catalog import EC2_TO_KUBE_ARCH
from reconciler.cloud.aws.clients import AwsCaller, error_code
from reconciler.model import labels as wk

GPU_MANUFACTURER = wk.INSTANCE_GPU_MANUFACTURER
ACCELERATOR_MANUFACTURER = "karpenter.k8s.aws/instance-accelerator-manufacturer"
STANDARD = "standard"
NVIDIA = "nvidia"
NEURON = "neuron"


class AMISelectionError(ValueError):
    pass


@dataclass(slots=True, frozen=True)
class Requirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value in self.values
        if self.operator == "NotIn":
            return value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None  # DoesNotExist

    def to_manifest(self) -> dict[str, Any]:
        manifest: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            manifest["values"] = list(self.values)
        return manifest


@dataclass(slots=True, frozen=True)
class AMI:
    id: str
    name: str
    requirements: tuple[Requirement, ...]
    creation_date: str = ""
    deprecated: bool = False

    def compatible(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)

    def to_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "requirements": [r.to_manifest() for r in self.requirements],
        }
        if self.deprecated:
            status["deprecated"] = True
        return status


@dataclass(slots=True, frozen=True)
class AliasParameter:
    path: str
    arch: str  # kubernetes arch
    variant: str


@dataclass(slots=True)
class ResolvedAMIs:
    family: AMIFamily
    amis: list[AMI] = field(default_factory=list)

    def for_labels(self, labels: Mapping[str, str]) -> AMI | None:
        """The AMI an instance type with ``labels`` launches with (first compatible, newest first)."""
        for ami in self.amis:
            if ami.compatible(labels):
                return ami
        return None


def _variant_requirements(arch: str, variant: str) -> tuple[Requirement, ...]:
    requirements = [Requirement(wk.ARCH, "In", (arch,))]
    if variant == NVIDIA:
        requirements.append(Requirement(GPU_MANUFACTURER, "In", ("nvidia",)))
    elif variant == NEURON:
        requirements.append(Requirement(ACCELERATOR_MANUFACTURER, "In", ("aws",)))
    else:
        requirements.append(Requirement(wk.INSTANCE_GPU_COUNT, "DoesNotExist"))
        requirements.append(Requirement("karpenter.k8s.aws/instance-accelerator-count", "DoesNotExist"))
    return tuple(requirements)


def alias_parameters(alias: str, kubernetes_version: str, *, path: str = "alias") -> list[AliasParameter]:
    """The SSM parameters an alias resolves through (one per architecture and accelerator variant)."""
    prefix, _, version = alias.partition("@")
    family = prefix.lower()
    if family not in ALIAS_FAMILIES:
        raise AMISelectionError(
            f"{path}: unknown alias family {prefix!r} (known: {', '.join(ALIAS_FAMILIES)})"
        )
    if not version:
        raise AMISelectionError(f"{path}: {alias!r} needs a version, e.g. {family}@latest")
    k8s = kubernetes_version
    latest = version == "latest"
    if family == "al2023":
        params = []
        for ec2_arch, variants in (("x86_64", (STANDARD, NVIDIA, NEURON)), ("arm64", (STANDARD, NVIDIA))):
            for variant in variants:
                base = f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{ec2_arch}/{variant}"
                leaf = (
                    "recommended/image_id"
                    if latest
                    else f"amazon-eks-node-al2023-{ec2_arch}-{variant}-{k8s}-{version}/image_id"
                )
                params.append(AliasParameter(f"{base}/{leaf}", EC2_TO_KUBE_ARCH[ec2_arch], variant))
        return params
    if family == "al2":
        params = []
        for suffix, arch, al2_variants in (
            ("", "amd64", (STANDARD,)),
            ("-arm64", "arm64", (STANDARD,)),
            ("-gpu", "amd64", (NVIDIA, NEURON)),
        ):
            base = f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2{suffix}"
            leaf = "recommended/image_id" if latest else f"amazon-eks{suffix}-node-{k8s}-{version}/image_id"
            params.extend(AliasParameter(f"{base}/{leaf}", arch, variant) for variant in al2_variants)
        return params
    if family == "bottlerocket":
        release = "latest" if latest else version.removeprefix("v")
        params = []
        for flavour, variant in (("", STANDARD), ("-nvidia", NVIDIA)):
            for ec2_arch in ("x86_64", "arm64"):
                params.append(
                    AliasParameter(
                        f"/aws/service/bottlerocket/aws-k8s-{k8s}{flavour}/{ec2_arch}/{release}/image_id",
                        EC2_TO_KUBE_ARCH[ec2_arch],
                        variant,
                    )
                )
        return params
    # Windows only has @latest.
    if not latest:
        raise AMISelectionError(f"{path}: Windows aliases only support @latest")
    year = family.removeprefix("windows")
    return [
        AliasParameter(
            f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id",
            "amd64",
            STANDARD,
        )
    ]


def describe_images_filters(term: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """DescribeImages arguments for one non-alias selector term, and a label for errors."""
    if term.get("id"):
        return {"ImageIds": [str(term["id"])]}, f"id {term['id']}"
    filters: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {}
    if term.get("name"):
        filters.append({"Name": "name", "Values": [str(term["name"])]})
        kwargs["Owners"] = [str(term["owner"])] if term.get("owner") else ["self", "amazon"]
    elif term.get("owner"):
        kwargs["Owners"] = [str(term["owner"])]
    for key, value in (term.get("tags") or {}).items():
        if value == "*":
            filters.append({"Name": "tag-key", "Values": [str(key)]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": [str(value)]})
    if filters:
        kwargs["Filters"] = filters
    return kwargs, ", ".join(f"{k}={v}" for k, v in term.items())


class AMIResolver:
    """Resolves ``spec.amiSelectorTerms`` (SSM results and image details are cached by the caller)."""

    def __init__(self, caller: AwsCaller, ec2: Any, ssm: Any) -> None:
        self._caller = caller
        self._ec2 = ec2
        self._ssm = ssm

    async def resolve(
        self, terms: Sequence[Mapping[str, Any]], family: AMIFamily, kubernetes_version: str, now: datetime
    ) -> ResolvedAMIs:
        if not terms:
            raise AMISelectionError("spec.amiSelectorTerms: at least one term is required")
        resolved = ResolvedAMIs(family)
        candidates: list[tuple[str, tuple[Requirement, ...]]] = []
        image_kwargs: list[tuple[dict[str, Any], str]] = []
        for index, term in enumerate(terms):
            where = f"spec.amiSelectorTerms[{index}]"
            if term.get("alias"):
                for parameter in alias_parameters(
                    str(term["alias"]), kubernetes_version, path=f"{where}.alias"
                ):
                    image_id = await self._ssm_value(parameter.path)
                    if image_id:
                        candidates.append(
                            (image_id, _variant_requirements(parameter.arch, parameter.variant))
                        )
            elif term.get("ssmParameter"):
                image_id = await self._ssm_value(str(term["ssmParameter"]))
                if image_id:
                    image_kwargs.append(({"ImageIds": [image_id]}, f"ssmParameter {term['ssmParameter']}"))
            else:
                image_kwargs.append(describe_images_filters(term))
        if candidates:
            images = await self._describe({"ImageIds": sorted({image_id for image_id, _ in candidates})})
            for image_id, requirements in candidates:
                image = images.get(image_id)
                if image is not None:
                    resolved.amis.append(_ami(image, requirements, now))
        selected: dict[str, Mapping[str, Any]] = {}
        for kwargs, _label in image_kwargs:
            selected.update(await self._describe(kwargs))
        resolved.amis.extend(_newest_per_arch(selected.values(), now))
        return resolved

    async def _ssm_value(self, name: str) -> str | None:
        try:
            answer = await self._caller.call(self._ssm.get_parameter, Name=name)
        except Exception as err:
            if error_code(err) in ("ParameterNotFound", "ParameterVersionNotFound"):
                return None
            raise
        return str(answer["Parameter"]["Value"])

    async def _describe(self, kwargs: dict[str, Any]) -> dict[str, Mapping[str, Any]]:
        try:
            images = await self._caller.paginate(self._ec2, "describe_images", "Images", **kwargs)
        except Exception as err:
            if error_code(err).startswith("InvalidAMIID"):
                return {}
            raise
        return {
            str(image["ImageId"]): image for image in images if image.get("State", "available") == "available"
        }


def _ami(image: Mapping[str, Any], requirements: tuple[Requirement, ...], now: datetime) -> AMI:
    return AMI(
        id=str(image["ImageId"]),
        name=str(image.get("Name", "")),
        requirements=requirements,
        creation_date=str(image.get("CreationDate", "")),
        deprecated=_is_past(image.get("DeprecationTime"), now),
    )


def _is_past(timestamp: Any, now: datetime) -> bool:
    if not timestamp:
        return False
    if isinstance(timestamp, datetime):
        return timestamp <= now
    try:
        return datetime.fromisoformat(str(timestamp).replace("Z", "+00:00")) <= now
    except ValueError:
        return False


def _newest_per_arch(images: Iterable[Mapping[str, Any]], now: datetime) -> list[AMI]:
    """Newest non-deprecated image per architecture (a deprecated one only when nothing else exists)."""
    by_arch: dict[str, list[AMI]] = {}
    for image in images:
        arch = EC2_TO_KUBE_ARCH.get(str(image.get("Architecture", "x86_64")))
        if arch is not None:
            by_arch.setdefault(arch, []).append(_ami(image, (Requirement(wk.ARCH, "In", (arch,)),), now))
    return [
        max(amis, key=lambda ami: (not ami.deprecated, ami.creation_date, ami.id))
        for _, amis in sorted(by_arch.items())
    ]
