"""MIME multi-part user data: reading the user's ``spec.userData`` and writing the merged archive.

AL2 and AL2023 nodes run cloud-init, which executes every part of a
``multipart/mixed`` archive in order. Karpenter's rule for the user's data: if
it already is MIME (starts with ``MIME-Version:`` or ``Content-Type:``) its parts
are copied with their own headers; otherwise it becomes one part whose type is
guessed by the family (a shell script, or on AL2023 a nodeadm ``NodeConfig``
when it parses as a YAML map). Karpenter's own part always comes last, so the
user's script runs first and the generated bootstrap has the final word.
"""

from __future__ import annotations

import email
import email.message
import email.policy
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

BOUNDARY = "//"
SHELL_SCRIPT = "text/x-shellscript"
NODE_CONFIG = "application/node.eks.aws"


class MimeError(ValueError):
    pass


@dataclass(slots=True, frozen=True)
class Part:
    """One part of the archive: its headers (in order) and its body, unchanged."""

    headers: tuple[tuple[str, str], ...]
    body: str

    @classmethod
    def of(cls, content_type: str, body: str) -> Part:
        charset = '; charset="us-ascii"' if content_type == SHELL_SCRIPT else ""
        return cls((("Content-Type", content_type + charset),), body)

    @property
    def content_type(self) -> str:
        for name, value in self.headers:
            if name.lower() == "content-type":
                return value.split(";", 1)[0].strip().lower()
        return "text/plain"


def is_mime(text: str) -> bool:
    stripped = text.strip()
    return stripped.startswith("MIME-Version:") or stripped.startswith("Content-Type:")


def parse(text: str, *, where: str = "spec.userData") -> list[Part]:
    """The parts of a ``multipart/*`` archive; a clear error naming ``where`` when it is not one."""
    message = email.message_from_string(text.strip() + "\n", policy=email.policy.compat32)
    if not message.get_content_maintype() == "multipart":
        raise MimeError(f"{where}: MIME user data must be multipart (Content-Type: multipart/mixed; boundary=...)")
    if not message.get_boundary():
        raise MimeError(f"{where}: MIME user data has no boundary")
    payload = message.get_payload()
    if not isinstance(payload, list) or not payload:
        raise MimeError(f"{where}: MIME user data has no parts (is the boundary {message.get_boundary()!r} used?)")
    parts = []
    for sub in payload:
        if not isinstance(sub, email.message.Message):
            raise MimeError(f"{where}: unreadable MIME part")
        body = sub.get_payload()
        if not isinstance(body, str):
            raise MimeError(f"{where}: nested multipart parts are not supported")
        parts.append(Part(tuple((name, str(value)) for name, value in sub.items()), body))
    return parts


def user_parts(custom: str | None, *, nodeconfig_yaml: bool = False) -> list[Part]:
    """The user's data as parts: its own if MIME, else one part (NodeConfig when ``nodeconfig_yaml`` and it
    is a YAML map, as AL2023's nodeadm reads it; a shell script otherwise)."""
    if not custom or not custom.strip():
        return []
    if is_mime(custom):
        return parse(custom)
    if nodeconfig_yaml and _is_yaml_map(custom):
        return [Part.of(NODE_CONFIG, custom)]
    return [Part.of(SHELL_SCRIPT, custom)]


def _is_yaml_map(text: str) -> bool:
    try:
        return isinstance(yaml.safe_load(text), dict)
    except yaml.YAMLError:
        return False


def archive(parts: Sequence[Part]) -> str:
    """``multipart/mixed`` with boundary ``//`` and LF line ends (what Karpenter writes)."""
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"', ""]
    for part in parts:
        lines.append(f"--{BOUNDARY}")
        lines += [f"{name}: {value}" for name, value in part.headers]
        lines += ["", part.body.rstrip("\n")]
    lines.append(f"--{BOUNDARY}--")
    return "\n".join(lines) + "\n"
