"""The interruption loops on the leader: H3's SQS queue consumer and DescribeInstanceStatus poller.

Both act by deleting (and, for scheduled maintenance, cordoning) the affected
NodeClaim; the termination finalizer drains it while the provisioner re-homes
its pods. Spot interruptions also mark the offering unavailable in the AWS
provider's own unavailable-offerings cache, so the next launch avoids it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from reconciler.controllers.runtime.context import ControllerContext, ControllerLog
from reconciler.kube.api import Manifest

log = ControllerLog("interruption")


class InterruptionLoop:
    """Runs the queue consumer and the instance-status poller until cancelled."""

    def __init__(self, ctx: ControllerContext, cloud: Any) -> None:
        from reconciler.interruption.health import HealthPoller
        from reconciler.interruption.queue_consumer import InterruptionQueueConsumer, InterruptionSettings

        self.ctx = ctx
        settings = InterruptionSettings.from_settings(ctx.settings)
        self.settings = settings
        def cached_nodeclaims() -> Iterable[Manifest] | None:
            """The leader's informer cache (set once its controllers start), not a LIST per message batch."""
            return ctx.cache.nodeclaims() if ctx.cache is not None and ctx.cache.synced else None

        self.consumer = InterruptionQueueConsumer(
            ctx.kube, cloud.clients.client("sqs"), settings, caller=cloud.caller, unavailable=cloud.unavailable,
            now=ctx.clock.now, metrics=cloud.metrics.interruption, nodeclaims=cached_nodeclaims,
        )
        self.health = HealthPoller(ctx.kube, cloud.clients.ec2, cloud.caller, unavailable=cloud.unavailable,
                                   now=ctx.clock.now, metrics=cloud.metrics.interruption, nodeclaims=cached_nodeclaims)

    async def run(self) -> None:
        log.info("consuming interruption queue", queue=self.settings.queue_name, rebalance=self.settings.rebalance)
        await asyncio.gather(self.consumer.run(asyncio.Event()), self._poll_health())

    async def _poll_health(self) -> None:
        while True:
            try:
                actions = await self.health.poll_once()
                for action in actions:
                    log.info("acting on unhealthy instance", NodeClaim={"name": action.nodeclaim},
                             action=action.kind.value, reason=action.reason)
            except Exception as err:  # the permission is optional and AWS may be flaky: log and go on
                log.warning("instance status poll failed", error=str(err))
            await asyncio.sleep(self.settings.health_poll_seconds)


def interruption_loop(ctx: ControllerContext, cloud: Any) -> InterruptionLoop:
    return InterruptionLoop(ctx, cloud)
