"""Print the platform the stack builds the reconciler image for (``linux/amd64`` or ``linux/arm64``).

    python scripts/image_platform.py Pulumi.staging.yaml

The image runs on the system node group, so it follows ``adze:systemNodeGroup.amiType``; nothing is printed
when ``adze:reconciler.image`` names a prebuilt image (no build). The deploy workflow sets up QEMU when this
differs from the runner's architecture. Bad stack config exits 2 with the config path, as ``pulumi preview``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from components.config import NAMESPACE, ConfigError, load_stack_config, parse_raw_value
from components.image import image_platform


def platform_of(stack_file: Path) -> str:
    config = (yaml.safe_load(stack_file.read_text()) or {}).get("config") or {}
    prefix = f"{NAMESPACE}:"
    raw = {key[len(prefix):]: parse_raw_value(key[len(prefix):], value) for key, value in config.items()
           if key.startswith(prefix) and not (isinstance(value, dict) and "secure" in value)}
    stack = load_stack_config(raw)
    return "" if stack.reconciler.image else image_platform(stack.system_node_group.arm64).value


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: image_platform.py Pulumi.<stack>.yaml", file=sys.stderr)
        return 2
    try:
        print(platform_of(Path(argv[0])))
    except (OSError, ConfigError) as err:
        print(f"error: {argv[0]}: {err}".replace("\n", " "), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
