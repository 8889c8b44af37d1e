"""Result documents: JSON output and the human-readable tables of ``simulate``."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from typing import Any

from reconciler.cloud import pricesource
from reconciler.model.money import money

STEP_LIMIT = 20  # items listed per step before the rest is summarised (simulate without --verbose)


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
    """A node's $/h, or "unknown" when no offering priced it (never a made-up $0.0000)."""
    if item.get("price") is None or ("priceSource" in item and not item["priceSource"]):
        return "unknown"
    return money(item["price"], month=False)


def price_source_lines(sources: list[str]) -> list[str]:
    """One "prices:" line per distinct source, estimates last (where every figure above comes from)."""
    return [f"prices: {source}" for source in sources]


def _counts(items: list[dict[str, Any]], *keys: str) -> str:
    """``12x default/m5.large/spot, 3x ...``: how many items share each combination of ``keys``."""
    counts = Counter("/".join(str(item.get(k) or "-") for k in keys) for item in items)
    return ", ".join(f"{count}x {key}" for key, count in counts.most_common())


def _shown(items: list[Any], verbose: bool) -> tuple[list[Any], int]:
    """The items to list one per line: all with ``verbose``, else the first ``STEP_LIMIT``."""
    if verbose or len(items) <= STEP_LIMIT:
        return items, 0
    return items[:STEP_LIMIT], len(items) - STEP_LIMIT


def render_text(result: dict[str, Any], *, verbose: bool = False) -> str:
    """The step-by-step tables; a step with many launches, disruptions, bindings or blockers is summarised
    (counts per NodePool, type and capacity, then the first ``STEP_LIMIT``) unless ``verbose``."""
    lines = [f"scenario: {result['scenario']}", ""]
    for index, step in enumerate(result["steps"]):
        lines.append(f"step {index}: {step['step']} @ {step['clock']}")
        lines += _launched_lines(step["launched"], verbose)
        if step["bound"]:
            by_node: dict[str, list[str]] = {}
            for pod, node in step["bound"].items():
                by_node.setdefault(node, []).append(pod)
            shown, more = _shown(sorted(by_node.items()), verbose)
            lines.append(f"  bound: {len(step['bound'])} pod(s) to {len(by_node)} node(s)" if more else "  bound:")
            lines.extend(f"    {node} <- {_pods_summary(pods)}" for node, pods in shown)
            lines += [f"    ... {more} more node(s) (--verbose lists all)"] if more else []
        disrupted, more = _shown(step["disrupted"], verbose)
        if more:
            lines.append(f"  disrupted {len(step['disrupted'])}: {_counts(step['disrupted'], 'reason', 'nodepool')}")
        for item in disrupted:
            replacements = ", ".join(item.get("replacements") or []) or "none"
            lines.append(
                f"  disrupted: {item['node']} reason={item['reason']} method={item['method']} "
                f"action={item['action']} replacements={replacements} "
                f"saves {money(item.get('savingsPerHour', 0), month=False)}"
            )
        lines += [f"    ... {more} more (--verbose lists all)"] if more else []
        notes = [e for e in step["events"] if e["reason"] in ("DisruptionBlocked", "Unconsolidatable",
                                                               "TerminationBlocked")]
        shown_notes, more = _shown(notes, verbose)
        if more:
            lines.append(f"  {len(notes)} blocked: {_counts(notes, 'reason', 'code')}")
        lines.extend(f"  {item['reason']}: {item['object']}: {item['message']}" for item in shown_notes)
        lines += [f"    ... {more} more (--verbose lists all)"] if more else []
        if step["pending"]:
            lines.append(f"  pending ({len(step['pending'])}):")
            limit = len(step["pending"]) if verbose else 10
            for pod, reason in list(step["pending"].items())[:limit]:
                lines.append(f"    {pod}: {reason}")
            if len(step["pending"]) > limit:
                lines.append(f"    ... {len(step['pending']) - limit} more")
        lines.append("")
    final = result["final"]
    lines.append(f"final nodes ({len(final['nodes'])}):")
    nodes, more = _shown(final["nodes"], verbose)
    if more:
        lines.append(f"  {_counts(final['nodes'], 'nodepool', 'instanceType', 'capacityType')}")
    rows = [
        [
            node["name"], node.get("nodepool") or "-", node.get("instanceType") or "-", node.get("zone") or "-",
            node.get("capacityType") or "-", _price(node), str(len(node["pods"])),
        ]
        for node in nodes
    ]
    lines.extend("  " + row for row in _table(["NODE", "NODEPOOL", "TYPE", "ZONE", "CAPACITY", "PRICE", "PODS"], rows))
    lines += [f"  ... {more} more (--verbose lists all)"] if more else []
    lines.append(f"pending pods: {len(final['pending'])}")
    lines.append(f"cost: {money(final['costPerHour'])}")
    unpriced = [n["name"] for n in final["nodes"] if "priceSource" in n and not n["priceSource"] and n.get("managed")]
    if unpriced:
        lines.append(f"unpriced: {', '.join(unpriced)} (no offering in the catalogue; not counted in the cost)")
    launched_sources = [i.get("priceSource") or "" for step in result["steps"] for i in step["launched"]]
    lines.extend(price_source_lines(pricesource.legend([*final.get("priceSources", []), *launched_sources])))
    return "\n".join(lines) + "\n"


def _launched_lines(launched: list[dict[str, Any]], verbose: bool) -> list[str]:
    if not launched:
        return []
    shown, more = _shown(launched, verbose)
    lines = [f"  launched {len(launched)}: {_counts(launched, 'nodepool', 'instanceType', 'capacityType')}"
             if more else "  launched:"]
    rows = [
        [
            item["nodeclaim"], item["nodepool"], item["instanceType"], item["zone"], item["capacityType"],
            _price(item), str(len(item["pods"])),
            _options_summary(item["instanceTypeOptions"]),
        ]
        for item in shown
    ]
    lines += ["    " + row for row in _table(
        ["NODECLAIM", "NODEPOOL", "TYPE", "ZONE", "CAPACITY", "PRICE", "PODS", "OPTIONS"], rows)]
    lines += [f"    ... {more} more (--verbose lists all)"] if more else []
    return lines
