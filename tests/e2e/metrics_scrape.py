"""Scraping a replica's ``/metrics`` through a test, as Prometheus would, to see which families ever had samples.

Gauges of passing states (a pod Pending, a NodeClaim terminating) have samples only while the state lasts, so
the scraper polls and keeps the union; counters and histograms, once they have samples, keep them.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families


def _exposed_name(name: str, kind: str) -> str:
    """The name Karpenter documents: counters with ``_total`` (the parser strips it)."""
    return f"{name}_total" if kind == "counter" else name


def read(text: str) -> tuple[set[str], set[str]]:
    """(families served, families with at least one sample) of one exposition."""
    served, sampled = set(), set()
    for family in text_string_to_metric_families(text):
        name = _exposed_name(family.name, family.type)
        served.add(name)
        if family.samples:
            sampled.add(name)
    return served, sampled


@dataclass
class Scraper:
    url: str
    served: set[str] = field(default_factory=set)
    sampled: set[str] = field(default_factory=set)
    scrapes: int = 0
    last: str = ""

    async def scrape(self) -> str:
        text, (served, sampled) = await asyncio.to_thread(_get_and_read, self.url)
        self.served |= served
        self.sampled |= sampled
        self.scrapes += 1
        self.last = text
        return text


def _get_and_read(url: str) -> tuple[str, tuple[set[str], set[str]]]:
    text = _get(url)
    return text, read(text)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


@contextlib.asynccontextmanager
async def scraping(url: str, interval: float = 0.5) -> AsyncIterator[Scraper]:
    scraper = Scraper(url)

    async def poll() -> None:
        while True:
            with contextlib.suppress(OSError):
                await scraper.scrape()
            await asyncio.sleep(interval)

    task = asyncio.create_task(poll())
    try:
        yield scraper
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await scraper.scrape()
