"""``python -m reconciler run`` with test-sized periods: the real entry point in a real process.

    ADZE_TEST_TIMINGS='{"gc_min_age": 2}' ADZE_TEST_SETTINGS='{"consolidation_validation_wait": 1}' \\
        python tests/support/timed_reconciler.py [run args]

Karpenter's periods (15 s consolidation validation, 10 s disruption polling, 30 s garbage-collection age...)
would make each end-to-end test last minutes. ``ADZE_TEST_TIMINGS`` (``reconciler.controllers.runtime.context.Timings``
fields) and ``ADZE_TEST_SETTINGS`` (``reconciler.settings.Settings`` fields the environment does not name) set
shorter ones; nothing else differs from ``python -m reconciler run``: same CLI, same settings parsing, same
kubeconfig and AWS clients, same signals and exit codes.

``ADZE_TEST_CRASH_FILE=path`` adds a seeded crash point: once ``path`` exists and holds a number N, the process
counts its writes (Kubernetes create/replace/patch/apply/delete/evict other than Leases and Events, and the
cloud's instance launches and terminations) and right after the N-th has taken effect it logs
``test crash point`` with that write and sends itself SIGKILL: a ``kill -9`` at a chosen write, with nothing
flushed, released or cleaned up.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
from typing import Any

from reconciler.controllers.operator import app as app_module
from reconciler.controllers.runtime.context import Timings
from reconciler.settings import Settings


def _overrides(variable: str) -> dict[str, Any]:
    raw = os.environ.get(variable, "")
    return dict(json.loads(raw)) if raw else {}


def install() -> None:
    timings = _overrides("ADZE_TEST_TIMINGS")
    settings = _overrides("ADZE_TEST_SETTINGS")
    if timings:
        app_module.App = functools.partial(app_module.App, timings=Timings(**timings))  # type: ignore[misc, assignment]
    if settings:
        from_env = Settings.from_env.__func__  # type: ignore[attr-defined]

        def with_overrides(cls: type[Settings], env: Any) -> Settings:
            return from_env(cls, env).with_overrides(**settings)  # type: ignore[no-any-return]

        Settings.from_env = classmethod(with_overrides)  # type: ignore[method-assign, assignment]


CRASH_POINT = "test crash point"
_KUBE_WRITES = ("create", "replace", "patch", "apply", "delete", "evict")
_IGNORED_KINDS = ("Lease", "Event")


class CrashPoint:
    """Counts writes once armed by the crash file; SIGKILLs the process after the N-th."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.remaining: int | None = None

    def after_write(self, what: str) -> None:
        if self.remaining is None:
            if not os.path.exists(self.path):
                return
            with open(self.path) as armed:
                self.remaining = int(armed.read().strip())
        self.remaining -= 1
        if self.remaining <= 0:
            print(json.dumps({"message": CRASH_POINT, "write": what}), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


def _kube_write(method: str, args: tuple[Any, ...]) -> str:
    first = args[0] if args else None
    if isinstance(first, dict):  # create/replace/apply(manifest)
        metadata = first.get("metadata") or {}
        return f"{method} {first.get('kind', '')}/{metadata.get('name', metadata.get('generateName', ''))}"
    if method == "evict":
        return f"evict Pod/{first}"
    kind = getattr(first, "kind", "")
    return f"{method} {kind}/{args[1] if len(args) > 1 else ''}"


def install_crash_point(path: str) -> None:
    from reconciler.cloud.aws.provider import AWSCloudProvider
    from reconciler.kube.live import LiveKube

    crash = CrashPoint(path)

    def counted(original: Any, describe: Any) -> Any:
        @functools.wraps(original)
        async def write(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = await original(self, *args, **kwargs)
            what = describe(args)
            if what is not None:
                crash.after_write(what)
            return result
        return write

    for method in _KUBE_WRITES:
        def describe(args: tuple[Any, ...], method: str = method) -> str | None:
            what = _kube_write(method, args)
            return None if what.split(" ", 1)[1].startswith(_IGNORED_KINDS) else what
        setattr(LiveKube, method, counted(getattr(LiveKube, method), describe))
    AWSCloudProvider.create = counted(  # type: ignore[method-assign]
        AWSCloudProvider.create, lambda args: f"cloud create {args[0].nodeclaim}")
    AWSCloudProvider.delete = counted(  # type: ignore[method-assign]
        AWSCloudProvider.delete, lambda args: f"cloud delete {args[0]}")


def install_tracemalloc(directory: str, frames: int = 8, period: float = 2.0) -> None:
    """Memory diagnosis: trace allocations and keep, in ``directory/peak.snap``, the snapshot taken when the
    traced total was highest (sampled every ``period`` s by a daemon thread); ``python -m tracemalloc``-style
    analysis then reads it with ``tracemalloc.Snapshot.load``."""
    import threading
    import time
    import tracemalloc

    tracemalloc.start(frames)
    os.makedirs(directory, exist_ok=True)

    def sample() -> None:
        highest = 0
        while True:
            time.sleep(period)
            current, _ = tracemalloc.get_traced_memory()
            if current > highest:
                highest = current
                partial = os.path.join(directory, "peak.snap.partial")
                tracemalloc.take_snapshot().dump(partial)
                os.replace(partial, os.path.join(directory, "peak.snap"))  # a reader never sees half of one

    threading.Thread(target=sample, name="tracemalloc-sampler", daemon=True).start()


def main() -> int:
    if os.environ.get("ADZE_TEST_TRACEMALLOC"):
        install_tracemalloc(os.environ["ADZE_TEST_TRACEMALLOC"])
    install()
    if os.environ.get("ADZE_TEST_CRASH_FILE"):
        install_crash_point(os.environ["ADZE_TEST_CRASH_FILE"])
    from reconciler.cli import main as reconciler_main

    return reconciler_main(["run", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
