"""A pytest plugin that writes each test's outcome as JSON (``AAIS_UPSTREAM_OUTCOMES``).

One line per test id: ``passed``, ``failed`` (a failed setup, call, teardown or
subtest counts) or ``skipped``. ``scripts/ci_agui_upstream.py`` compares two runs.
"""

from __future__ import annotations

import json
import os
from typing import Any

_OUTCOMES: dict[str, str] = {}
_RANK = {"skipped": 0, "passed": 1, "failed": 2}


def pytest_runtest_logreport(report: Any) -> None:
    if report.when != "call" and report.passed:
        return
    outcome = "failed" if report.failed else report.outcome
    if report.when != "call" and outcome == "skipped" and report.nodeid in _OUTCOMES:
        return
    current = _OUTCOMES.get(report.nodeid)
    if current is None or _RANK[outcome] > _RANK[current]:
        _OUTCOMES[report.nodeid] = outcome


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _OUTCOMES[report.nodeid] = "failed"


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    path = os.environ.get("AAIS_UPSTREAM_OUTCOMES")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(_OUTCOMES, out, indent=0, sort_keys=True)
