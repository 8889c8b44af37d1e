"""Result documents: JSON output and the human-readable tables of ``simulate``."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from reconciler.cloud import pricesource


def write_result(result: dict[str, Any], *, json_stdout: bool, out_path: str | None) -> None:
    text = json.dumps(result, indent=2, sort_keys=False, allow_nan=False) + "\n"  # strict JSON
    if out_path:
        # Written whole or not at all: an interrupted run never leaves half a result behind.
        partial = f"{out_path}.partial"
        with open(partial, "w") as handle:
            handle.write(text)
        os.replace(partial, out_path)
    if json_stdout:
        sys.stdout.write(text)


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line.rstrip()]
    out.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    return out


def _pods_summary(pods: list[str], limit: int = 4) -> str:
    if len(pods) <= limit:
        return ", ".join(pods) or "-"
    return ", ".join(pods[:limit]) + f" (+{len(pods) - limit} more)"


def _options_summary(options: list[str], limit: int = 3) -> str:
    return ", ".join(options[:limit]) + (" ..." if len(options) > limit else "")


def _price(item: dict[str, Any]) -> str:
    """A node's $/h, or "unknown" when no offering priced it (never a made-up 0.0000)."""
    if item.get("price") is None or ("priceSource" in item and not item["priceSource"]):
        return "unknown"
    return f"{item['price']:.4f}"


def price_source_lines(sources: list[str]) -> list[str]:
    """One "prices:" line per distinct source, estimates last (where every figure above comes from)."""
    return [f"prices: {source}" for source in sources]


def render_text(result: dict[str, Any]) -> str:
    lines = [f"scenario: {result['scenario']}", ""]
    for index, step in enumerate(result["steps"]):
        lines.append(f"step {index}: {step['step']} @ {step['clock']}")
        if step["launched"]:
            rows = [
                [
                    item["nodeclaim"], item["nodepool"], item["instanceType"], item["zone"], item["capacityType"],
                    _price(item), str(len(item["pods"])),
                    _options_summary(item["instanceTypeOptions"]),
                ]
                for item in step["launched"]
            ]
            lines.append("  launched:")
            lines.extend(
                "    " + row
                for row in _table(["NODECLAIM", "NODEPOOL", "TYPE", "ZONE", "CAPACITY", "$/H", "PODS", "OPTIONS"], rows)
            )
        if step["bound"]:
            by_node: dict[str, list[str]] = {}
            for pod, node in step["bound"].items():
                by_node.setdefault(node, []).append(pod)
            lines.append("  bound:")
            lines.extend(f"    {node} <- {_pods_summary(pods)}" for node, pods in sorted(by_node.items()))
        for item in step["disrupted"]:
            replacements = ", ".join(item.get("replacements") or []) or "none"
            lines.append(
                f"  disrupted: {item['node']} reason={item['reason']} method={item['method']} "
                f"action={item['action']} replacements={replacements} "
                f"savings={item.get('savingsPerHour', 0):.4f} $/h"
            )
        for item in step["events"]:
            if item["reason"] in ("DisruptionBlocked", "Unconsolidatable", "TerminationBlocked"):
                lines.append(f"  {item['reason']}: {item['object']}: {item['message']}")
        if step["pending"]:
            lines.append(f"  pending ({len(step['pending'])}):")
            for pod, reason in list(step["pending"].items())[:10]:
                lines.append(f"    {pod}: {reason}")
            if len(step["pending"]) > 10:
                lines.append(f"    ... {len(step['pending']) - 10} more")
        lines.append("")
    final = result["final"]
    lines.append("final nodes:")
    rows = [
        [
            node["name"], node.get("nodepool") or "-", node.get("instanceType") or "-", node.get("zone") or "-",
            node.get("capacityType") or "-", _price(node), str(len(node["pods"])),
        ]
        for node in final["nodes"]
    ]
    lines.extend("  " + row for row in _table(["NODE", "NODEPOOL", "TYPE", "ZONE", "CAPACITY", "$/H", "PODS"], rows))
    lines.append(f"pending pods: {len(final['pending'])}")
    lines.append(f"cost: {final['costPerHour']:.4f} $/h ({final['costPerHour'] * 730:.2f} $/month)")
    unpriced = [n["name"] for n in final["nodes"] if "priceSource" in n and not n["priceSource"] and n.get("managed")]
    if unpriced:
        lines.append(f"unpriced: {', '.join(unpriced)} (no offering in the catalogue; not counted in the cost)")
    launched_sources = [i.get("priceSource") or "" for step in result["steps"] for i in step["launched"]]
    lines.extend(price_source_lines(pricesource.legend([*final.get("priceSources", []), *launched_sources])))
    return "\n".join(lines) + "\n"
