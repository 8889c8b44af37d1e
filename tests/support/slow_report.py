"""A pytest plugin printing each collected test as ``SLOW <id>`` or ``FAST <id>`` once collection has finished
(after every conftest's ``pytest_collection_modifyitems``), so one ``--collect-only`` run shows both sets."""

from __future__ import annotations

import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
    for item in session.items:
        print(("SLOW " if item.get_closest_marker("slow") else "FAST ") + item.nodeid)
