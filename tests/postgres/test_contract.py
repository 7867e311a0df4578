"""The backend-neutral ledger contract (tests/ledger) run against PostgresLedger.

Every ``test_*`` function in ``tests/ledger/test_*.py`` that takes the ``ledger``
fixture is collected here as well, where ``ledger`` is a PostgresLedger in a fresh
schema (conftest.py). Contract tests added there are picked up without a change here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ._contract import CONTRACT_DIR, contract_module


def _contract_tests() -> dict[str, Callable[..., Any]]:
    """The contract test functions by name (suffixed with their module on a clash)."""
    found: dict[str, Callable[..., Any]] = {}
    for path in sorted(CONTRACT_DIR.glob("test_*.py")):
        module = contract_module(path.stem)
        for name, function in vars(module).items():
            if (
                name.startswith("test_")
                and inspect.isfunction(function)
                and function.__module__ == module.__name__
                and "ledger" in inspect.signature(function).parameters
            ):
                found[name if name not in found else f"{name}__{path.stem}"] = function
    return found


_CONTRACT = _contract_tests()
globals().update(_CONTRACT)


def test_the_contract_suite_was_found() -> None:
    assert len(_CONTRACT) >= 50
    assert "test_identical_replay_returns_same_resolution" in _CONTRACT
