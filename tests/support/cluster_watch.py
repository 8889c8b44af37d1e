"""Event-driven waits and recordings over the real API server's list + watch (no polling loops, no sleeps).

``wait_for(plane, path, predicate, timeout)`` lists ``path`` (a collection: ``/api/v1/namespaces/ns/pods``,
``/apis/karpenter.sh/v1/nodeclaims``...), then watches it from the list's resourceVersion, keeping the current
objects by name; after the list and after every event it calls ``predicate(objects)`` and returns the first
truthy answer. The deadline is ``timeout`` x ``ADZE_TEST_TIME_SCALE``; on expiry ``TimeoutError`` names what was
waited for and shows ``describe(objects)``. A 410 Gone (compacted resourceVersion) re-lists.

``Recorder(plane, path, check)`` does the same in a thread for a whole test phase: ``check(objects)`` runs on
every change and whatever it returns (a violation message) is kept in ``violations``.
"""

from __future__ import annotations

import http.client
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from support.control_plane import ApiError, ControlPlane, scaled

Objects = dict[str, dict[str, Any]]  # "namespace/name" -> object
T = TypeVar("T")


def key_of(obj: Mapping[str, Any]) -> str:
    metadata = obj["metadata"]
    return f"{metadata.get('namespace', '')}/{metadata['name']}"


def list_objects(plane: ControlPlane, path: str, selector: str | None = None) -> tuple[Objects, str]:
    query = {"labelSelector": selector} if selector else None
    answer = plane.request("GET", path, query=query)
    return {key_of(o): o for o in answer["items"]}, answer["metadata"]["resourceVersion"]


def watch_events(
    plane: ControlPlane, path: str, resource_version: str, seconds: float, selector: str | None = None
) -> Iterator[dict[str, Any]]:
    """Raw watch events from ``resource_version`` for at most ``seconds`` (the server ends the stream)."""
    assert plane.admin is not None
    host, port = plane.url.removeprefix("https://").rsplit(":", 1)
    connection = http.client.HTTPSConnection(host, int(port), context=plane.admin.context, timeout=seconds + 30)
    query = (f"watch=1&allowWatchBookmarks=true&resourceVersion={resource_version}"
             f"&timeoutSeconds={max(1, math.ceil(seconds))}")
    if selector:
        query += f"&labelSelector={selector}"
    try:
        connection.request("GET", f"{path}?{query}", headers={"Accept": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            raise ApiError(response.status, _decode(response.read()), f"watch {path}")
        while True:
            line = response.readline()
            if not line:
                return
            yield json.loads(line)
    finally:
        connection.close()


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw.decode(errors="replace")


def changes(
    plane: ControlPlane, path: str, seconds: float, selector: str | None = None, window: float = 5.0,
    on_deleted: Callable[[dict[str, Any]], None] | None = None,
) -> Iterator[tuple[Objects, dict[str, Any] | None]]:
    """``(objects, changed)`` after the list, after every change and at least every ``window`` seconds, for
    ``seconds`` (already scaled): ``changed`` is the object an event carried (``objects`` already updated; a
    deletion's object is gone from it), None after a (re)list or a quiet window. One watch continues from the
    last resourceVersion; only a 410 re-lists. ``on_deleted`` gets every object a DELETED event carries (its
    resourceVersion: the deletion's)."""
    deadline = time.monotonic() + seconds
    objects, version = list_objects(plane, path, selector)
    yield objects, None
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            for event in watch_events(plane, path, version, min(remaining, window), selector):
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    raise ApiError(int(obj.get("code") or 500), obj, f"watch {path}")
                version = obj["metadata"].get("resourceVersion", version)
                if kind == "BOOKMARK":
                    continue
                if kind == "DELETED":
                    objects.pop(key_of(obj), None)
                    if on_deleted is not None:
                        on_deleted(obj)
                else:
                    objects[key_of(obj)] = obj
                yield objects, obj
                if time.monotonic() >= deadline:
                    return
        except ApiError as err:
            if err.status != 410:
                raise
            objects, version = list_objects(plane, path, selector)
        yield objects, None


def follow(
    plane: ControlPlane, path: str, seconds: float, selector: str | None = None, window: float = 5.0,
    on_deleted: Callable[[dict[str, Any]], None] | None = None,
) -> Iterator[Objects]:
    """``changes`` without the changed object: the current objects after the list and every change."""
    for objects, _changed in changes(plane, path, seconds, selector, window, on_deleted):
        yield objects


def wait_for(
    plane: ControlPlane,
    path: str,
    predicate: Callable[[Objects], T | None],
    timeout: float,
    *,
    what: str = "",
    describe: Callable[[Objects], str] = lambda objects: ", ".join(sorted(objects)) or "(none)",
    selector: str | None = None,
) -> T:
    """The first truthy ``predicate(objects)``; ``TimeoutError`` after ``timeout`` (scaled) seconds."""
    seconds = scaled(timeout)
    last: Objects = {}
    for objects in follow(plane, path, seconds, selector):
        last = objects
        answer = predicate(objects)
        if answer:
            return answer
    raise TimeoutError(f"not within {seconds:.0f} s: {what or path}; last seen: {describe(last)}")


class Recorder:
    """Runs ``check`` on every change of ``path`` in a thread until ``stop()``; keeps what it returns."""

    def __init__(
        self, plane: ControlPlane, path: str, check: Callable[[Objects], str | None], selector: str | None = None
    ) -> None:
        self.plane = plane
        self.path = path
        self.check = check
        self.selector = selector
        self.violations: list[str] = []
        self.deleted: dict[str, int] = {}  # "namespace/name" -> the resourceVersion (etcd revision) of its deletion
        self.changes = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"recorder {path}", daemon=True)

    def start(self) -> Recorder:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for objects in follow(self.plane, self.path, 24 * 3600.0, self.selector, window=1.0,
                                      on_deleted=self._deleted):
                    self.changes += 1
                    problem = self.check(objects)
                    if problem:
                        self.violations.append(problem)
                    if self._stop.is_set():
                        return
            except Exception as err:  # kept and reported by the test, never swallowed silently
                self.errors.append(f"{type(err).__name__}: {err}")
                self._stop.wait(0.5)

    def _deleted(self, obj: dict[str, Any]) -> None:
        self.deleted.setdefault(key_of(obj), int(obj["metadata"]["resourceVersion"]))

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
