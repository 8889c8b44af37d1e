"""Launch template network interfaces: EFA, ``spec.networkInterfaces``, IP prefixes, IPv6, conntrack.

Which interfaces an instance gets, in Karpenter's order of precedence:

1. ``spec.networkInterfaces`` (v1.11): exactly those (card, device, type), each in the NodeClass's
   security groups; EFA-only interfaces carry no IP settings (EC2 rejects them there);
2. else a NodeClaim that requests ``vpc.amazonaws.com/efa``: one ``efa`` interface per EFA the type
   supports, one per network card, the first as device 0 and the rest as device 1;
3. else one primary interface when anything needs it (``ipPrefixCount``, an IPv6 cluster,
   ``associatePublicIPAddress``, ``connectionTracking``); with nothing to say the template lists the
   security groups itself and EC2 builds the default interface.

``ipPrefixCount`` (v1.8) asks for that many /28 IPv4 prefixes, /80 IPv6 prefixes on IPv6 clusters,
where every ENA interface also gets its primary IPv6 address. ``connectionTracking`` (v1.13) sets the
idle timeouts on every ENA interface. Pure functions: EC2 ``LaunchTemplateData.NetworkInterfaces``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.cloud.aws.catalog import InstanceTypeInfo

EFA_RESOURCE = "vpc.amazonaws.com/efa"
EFA_ONLY = "efa-only"
_CONNTRACK_KEYS = (
    ("tcpEstablishedTimeout", "TcpEstablishedTimeout"),
    ("udpStreamTimeout", "UdpStreamTimeout"),
    ("udpTimeout", "UdpTimeout"),
)


def connection_tracking(spec: Mapping[str, Any] | None) -> dict[str, int] | None:
    """``spec.connectionTracking`` as EC2's ConnectionTrackingSpecification (None when unset)."""
    result = {ec2: int(value) for key, ec2 in _CONNTRACK_KEYS if (value := (spec or {}).get(key)) is not None}
    return result or None


def network_interfaces(
    *,
    security_groups: Sequence[str],
    efa_count: int = 0,
    nodeclass_interfaces: Sequence[Mapping[str, Any]] | None = None,
    ip_prefix_count: int | None = None,
    ipv6: bool = False,
    associate_public_ip: bool | None = None,
    conntrack: Mapping[str, int] | None = None,
) -> list[dict[str, Any]] | None:
    """The template's ``NetworkInterfaces``, or None when the default interface needs no settings."""

    def ena_settings(interface: dict[str, Any]) -> dict[str, Any]:
        if ip_prefix_count is not None:
            interface["Ipv6PrefixCount" if ipv6 else "Ipv4PrefixCount"] = ip_prefix_count
        if ipv6:
            interface.update({"PrimaryIpv6": True, "Ipv6AddressCount": 1})
        if associate_public_ip is not None:
            interface["AssociatePublicIpAddress"] = associate_public_ip
        if conntrack:
            interface["ConnectionTrackingSpecification"] = dict(conntrack)
        return interface

    groups = list(security_groups)
    if nodeclass_interfaces:
        result = []
        for spec in nodeclass_interfaces:
            interface: dict[str, Any] = {
                "NetworkCardIndex": int(spec["networkCardIndex"]),
                "DeviceIndex": int(spec["deviceIndex"]),
                "InterfaceType": str(spec["interfaceType"]),
                "Groups": list(groups),
            }
            result.append(interface if spec["interfaceType"] == EFA_ONLY else ena_settings(interface))
        return result
    if efa_count > 0:
        return [
            ena_settings({"NetworkCardIndex": card, "DeviceIndex": 0 if card == 0 else 1, "InterfaceType": "efa",
                          "Groups": list(groups)})
            for card in range(efa_count)
        ]
    if ip_prefix_count is None and not ipv6 and associate_public_ip is None and not conntrack:
        return None
    return [ena_settings({"DeviceIndex": 0, "Groups": list(groups)})]


def efa_only_on_primary_card(nodeclass_interfaces: Sequence[Mapping[str, Any]] | None) -> int:
    """EFA-only interfaces on card 0: they use ENI slots the pods' IPs would otherwise have."""
    return sum(
        1 for i in nodeclass_interfaces or () if i.get("interfaceType") == EFA_ONLY and not i.get("networkCardIndex")
    )


def efa_capacity(info: InstanceTypeInfo, nodeclass_interfaces: Sequence[Mapping[str, Any]] | None) -> int:
    """``vpc.amazonaws.com/efa`` a node offers: the NodeClass's EFA-only interfaces if it lists interfaces,
    else every EFA interface the type supports."""
    if nodeclass_interfaces is not None:
        return sum(1 for i in nodeclass_interfaces if i.get("interfaceType") == EFA_ONLY)
    return info.efa_interfaces


def interfaces_fit(info: InstanceTypeInfo, nodeclass_interfaces: Sequence[Mapping[str, Any]] | None) -> bool:
    """Whether the type can take ``spec.networkInterfaces``: ENA support, the cards and device indexes
    exist, and enough EFA interfaces for the EFA-only ones (upstream's compatibility checks)."""
    if nodeclass_interfaces is None:
        return True
    if not info.ena_supported:
        return False
    cards = info.network_cards or (info.network_interfaces,)
    for interface in nodeclass_interfaces:
        card = int(interface.get("networkCardIndex") or 0)
        if card >= len(cards) or int(interface.get("deviceIndex") or 0) >= cards[card]:
            return False
    efa_only = sum(1 for i in nodeclass_interfaces if i.get("interfaceType") == EFA_ONLY)
    return efa_only <= info.efa_interfaces
