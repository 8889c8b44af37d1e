"""One botocore client class per session, service and API version for the whole test run.

botocore builds a client's class afresh for every client it creates: one method per operation (about 700 for
EC2), some 15 ms of CPU each time, and the suite builds thousands of clients (every provider under test has its
own). The class depends only on the service model and the session's ``creating-client-class`` handlers, so it is
built once per (session, service, API version). Each client still gets its own copy of the event emitter, its
config, credentials and endpoint: a handler registered on one client never reaches another.
"""

from __future__ import annotations

import weakref
from typing import Any

from botocore.client import ClientCreator

# session event emitter -> (service, API version) -> client class
_CLASSES: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], type]] = weakref.WeakKeyDictionary()


def install() -> None:
    """Make ``ClientCreator`` reuse the client class it built for the same session and service (idempotent)."""
    original = ClientCreator._create_client_class
    if getattr(original, "_adze_per_session", False):
        return

    def create_client_class(self: ClientCreator, service_name: str, service_model: Any) -> type:
        per_session = _CLASSES.setdefault(self._event_emitter, {})
        key = (service_name, str(service_model.api_version))
        known = per_session.get(key)
        if known is None:
            known = per_session[key] = original(self, service_name, service_model)
        return known

    create_client_class._adze_per_session = True  # type: ignore[attr-defined]
    ClientCreator._create_client_class = create_client_class  # type: ignore[method-assign]
