"""What every controller shares: ``context`` (clock, timings, wake-ups, per-object locks, ``ControllerContext``),
``backoff`` (per-object retry delays), ``workers`` (per-object background tasks) and ``periodic`` (a pass every
interval)."""
