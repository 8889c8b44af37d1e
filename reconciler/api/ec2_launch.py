"""EC2NodeClass launch settings: block devices, instance metadata, network interfaces, CPU options."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, Strict, model_validator

from .base import ApiModel, SchemaExtra, cel, check_with, matching
from .errors import field_error

VolumeType = Literal["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"]
IOPS_VOLUME_TYPES = ("io1", "io2", "gp3")
THROUGHPUT_VOLUME_TYPES = ("gp3",)

# EBS sizes in G/Gi/T/Ti, 1 up to the 64 TiB EBS maximum (as Karpenter's CRD, without its Ti-range gaps).
VOLUME_SIZE_PATTERN = (
    r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|5[0-8][0-9]{3}|59000)Gi"
    r"|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-3][0-9]{3}|64000)G"
    r"|(?:[1-9]|[1-4][0-9]|5[0-8])Ti"
    r"|(?:[1-9]|[1-5][0-9]|6[0-4])T)$"
)
VolumeSize = Annotated[
    str,
    *matching(
        VOLUME_SIZE_PATTERN,
        lambda v: f"volumeSize {v!r} must be a whole number of Gi, G, Ti or T between 1Gi and 64T (e.g. 20Gi)",
    ),
]


class BlockDevice(ApiModel):
    """An EBS volume."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            ("has(self.snapshotID) || has(self.volumeSize)", "snapshotID or volumeSize must be defined"),
            (
                "!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')",
                "snapshotID must be set when volumeInitializationRate is set",
            ),
        )
    )

    delete_on_termination: bool | None = None
    encrypted: bool | None = None
    iops: Annotated[int, Strict(), Field(ge=0)] | None = None
    kms_key_id: str | None = Field(default=None, alias="kmsKeyID")
    snapshot_id: str | None = Field(default=None, alias="snapshotID")
    throughput: Annotated[int, Strict(), Field(ge=0)] | None = None
    volume_initialization_rate: Annotated[int, Strict(), Field(ge=100, le=300)] | None = None
    volume_size: VolumeSize | None = None
    volume_type: VolumeType | None = None

    @model_validator(mode="after")
    def _check_volume(self) -> BlockDevice:
        if self.snapshot_id is None and self.volume_size is None:
            raise field_error("snapshotID or volumeSize must be defined")
        if self.volume_initialization_rate is not None and not self.snapshot_id:
            raise field_error("snapshotID must be set when volumeInitializationRate is set", "volumeInitializationRate")
        # EC2 rejects these combinations at launch; say so when the class is applied instead.
        if self.iops is not None and self.volume_type is not None and self.volume_type not in IOPS_VOLUME_TYPES:
            raise field_error(f"iops is only supported for {', '.join(IOPS_VOLUME_TYPES)} volumes", "iops")
        if (
            self.throughput is not None
            and self.volume_type is not None
            and self.volume_type not in THROUGHPUT_VOLUME_TYPES
        ):
            raise field_error("throughput is only supported for gp3 volumes", "throughput")
        return self


class BlockDeviceMapping(ApiModel):
    device_name: str | None = None
    ebs: BlockDevice | None = None
    root_volume: bool | None = None


def _one_root_volume(mappings: list[BlockDeviceMapping]) -> str | None:
    roots = sum(1 for mapping in mappings if mapping.root_volume)
    return f"must have only one blockDeviceMappings with rootVolume (found {roots})" if roots > 1 else None


BlockDeviceMappings = Annotated[
    list[BlockDeviceMapping],
    Field(max_length=50),
    check_with(_one_root_volume),
    SchemaExtra(
        cel(
            (
                "self.filter(x, has(x.rootVolume) ? x.rootVolume == true : false).size() <= 1",
                "must have only one blockDeviceMappings with rootVolume",
            )
        )
    ),
]

EnabledDisabled = Literal["enabled", "disabled"]
METADATA_OPTIONS_DEFAULT: dict[str, Any] = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 1,
    "httpTokens": "required",
}


class MetadataOptions(ApiModel):
    """Instance metadata service (IMDS) settings; defaults lock IMDS to IMDSv2 with a hop limit of 1."""

    http_endpoint: EnabledDisabled = "enabled"
    http_protocol_ipv6: EnabledDisabled = Field(default="disabled", alias="httpProtocolIPv6")
    http_put_response_hop_limit: Annotated[int, Strict(), Field(ge=1, le=64)] = 1
    http_tokens: Literal["required", "optional"] = "required"


class NetworkInterface(ApiModel):
    network_card_index: Annotated[int, Strict(), Field(ge=0)]
    device_index: Annotated[int, Strict(), Field(ge=0)]
    interface_type: Literal["interface", "efa-only"]


def _interfaces_problem(interfaces: list[NetworkInterface]) -> str | None:
    if not interfaces:
        return None
    if not any(
        i.device_index == 0 and i.network_card_index == 0 and i.interface_type == "interface" for i in interfaces
    ):
        return "networkInterfaces must include a primary interface (networkCardIndex 0, deviceIndex 0, interface)"
    slots = [(i.network_card_index, i.device_index) for i in interfaces]
    if len(set(slots)) != len(slots):
        return "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs"
    efa_cards = [i.network_card_index for i in interfaces if i.interface_type == "efa-only"]
    if len(set(efa_cards)) != len(efa_cards):
        return "networkInterfaces can have at most one efa-only device per network card"
    return None


NetworkInterfaces = Annotated[
    list[NetworkInterface],
    Field(max_length=150),
    check_with(_interfaces_problem),
    SchemaExtra(
        cel(
            (
                "self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0"
                " && x.interfaceType == 'interface')",
                "networkInterfaces must include a primary interface with interfaceType='interface'",
            ),
            (
                "self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex)"
                ".size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex =="
                " y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))",
                "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, "
                "and can have at most one efa device per network card",
            ),
        )
    ),
]


class ConnectionTracking(ApiModel):
    """Idle timeouts (seconds) for connection tracking on the ENIs Karpenter creates."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
                "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",
            )
        )
    )

    tcp_established_timeout: Annotated[int, Strict(), Field(ge=60, le=432000)] | None = None
    udp_stream_timeout: Annotated[int, Strict(), Field(ge=60, le=180)] | None = None
    udp_timeout: Annotated[int, Strict(), Field(ge=30, le=60)] | None = None

    @model_validator(mode="after")
    def _check_any(self) -> ConnectionTracking:
        if self.tcp_established_timeout is None and self.udp_stream_timeout is None and self.udp_timeout is None:
            raise field_error("at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set")
        return self


class CPUOptions(ApiModel):
    nested_virtualization: EnabledDisabled | None = None
