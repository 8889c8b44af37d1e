"""Structured logs: one JSON object per line with Karpenter's keys (level, time, logger, message,
then the facts), for stdlib ``logging`` (including ``extra=``) and structlog loggers alike."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, MutableMapping
from datetime import datetime, timedelta
from typing import IO, Any

import structlog


def _karpenter_keys(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Rename structlog's keys to the ones Karpenter's zap logger writes."""
    event["message"] = event.pop("event", "")
    event["level"] = str(event.get("level", method)).upper()
    if "logger" not in event and event.get("_logger_name"):
        event["logger"] = event["_logger_name"]
    event.pop("_logger_name", None)
    return event


def _logger_name(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    record = event.get("_record")
    name = record.name if record is not None else getattr(logger, "name", None)
    if name:
        event.setdefault("logger", name)
    return event


def configure_logging(level: str = "info", stream: IO[str] | None = None) -> None:
    """JSON lines on ``stream`` (stdout) for both structlog and stdlib ``logging`` (incl. ``extra=``)."""
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="time"),
        structlog.stdlib.ExtraAdder(),
    ]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, _logger_name],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            _karpenter_keys,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(default=str, sort_keys=False),
        ],
    )
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level.upper())
    structlog.configure(
        processors=[
            *shared[:-1],
            structlog.stdlib.add_logger_name,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def get_logger(controller: str) -> Any:
    """A structlog logger named and bound like Karpenter's (``logger``/``controller`` keys)."""
    return structlog.get_logger("controller").bind(controller=controller)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g}s"
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return value


def log_decision(logger: Any, message: str, facts: Mapping[str, Any] | None = None, **more: Any) -> None:
    """Log one decision with the facts it rests on, e.g.
    ``log_decision(log, "computed new nodeclaim(s) to fit pod(s)", nodeclaims=1, pods=5)``."""
    fields = {key: _plain(value) for key, value in {**(facts or {}), **more}.items()}
    if isinstance(logger, logging.Logger):
        # stdlib loggers take facts through ``extra``, which may not shadow LogRecord attributes.
        logger.info(message, extra={f"fact_{k}" if k in _RECORD_ATTRIBUTES else k: v for k, v in fields.items()})
    else:
        logger.info(message, **fields)


_RECORD_ATTRIBUTES = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
