"""The hostile-input tally: every hostile test records what it tried; the run prints one table.

Any suite may call :func:`record` (``from hostile.report import record``; ``tests/``
is on ``sys.path``), or wrap one hostile call in :func:`hostile_input` or
:func:`refused`. The table is printed by ``pytest_terminal_summary`` in
``tests/conftest.py`` whenever anything recorded, and written to
``artifacts/hostile/report.json``. "Failed open" means a hostile input left an
approval recorded, an action executed, or (tampering) a verification passing;
"5xx" counts server errors (AG-UI ``RUN_ERROR``s with the internal code, and in
the library an exception other than the documented refusal); "double runs"
counts actions that ran more than once for one approval. Every count comes from
an observation (a response, an action counter, the ledger), never a constant.

A row with a failed open input, a 5xx or a double run fails the test run
(:func:`failing_rows`, asked by ``pytest_sessionfinish`` in ``tests/conftest.py``),
even when every test passed: the one documented exception is the double runs of
:data:`DOUBLE_RUNS_EXPECTED`, the opt-in idempotent retry after a crash (running it
again is what it declares). Only what this run recorded is judged, so running one
folder, one file or one test judges exactly what ran.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "DOUBLE_RUNS_EXPECTED",
    "Tally",
    "failing_rows",
    "hostile_input",
    "record",
    "refused",
    "render",
    "tallies",
    "write_json",
]

DOUBLE_RUNS_EXPECTED = frozenset({"kill -9, idempotent (opt-in)"})
"""Rows whose double runs are the documented behaviour, not a failure (CONTRIBUTING):
an action declared idempotent runs again after a crash. Their failed open and 5xx
counts must still be 0."""


@dataclass
class Tally:
    """Totals of one category."""

    tried: int = 0
    failed_open: int = 0
    server_errors: int = 0
    double_runs: int = 0


_LOCK = threading.Lock()
_TALLIES: dict[str, Tally] = {}


def record(
    category: str, tried: int, failed_open: int = 0, server_errors: int = 0, double_runs: int = 0
) -> None:
    """Add ``tried`` hostile inputs (and what went wrong with them) to ``category``."""
    with _LOCK:
        tally = _TALLIES.setdefault(category, Tally())
        tally.tried += tried
        tally.failed_open += failed_open
        tally.server_errors += server_errors
        tally.double_runs += double_runs


@contextmanager
def hostile_input(category: str, opened: Callable[[], bool]) -> Iterator[None]:
    """Count the one hostile call in the block; however the block ends, ask ``opened``
    (an observation: the action counter, the ledger) whether the input got through.

    An exception escaping the block (other than a failed assertion) counts as a 5xx.
    """
    crashed = False
    try:
        yield
    except Exception as error:
        crashed = not isinstance(error, AssertionError)
        raise
    finally:
        record(category, 1, failed_open=int(bool(opened())), server_errors=int(crashed))


@contextmanager
def refused(
    category: str,
    expected: type[BaseException] | tuple[type[BaseException], ...],
    *,
    opened: Callable[[], bool] | None = None,
) -> Iterator[pytest.ExceptionInfo[Any]]:
    """``pytest.raises`` that also counts the one hostile call in the block.

    Failed open: ``opened()`` when given (what the input changed), else the call
    returning at all (the input was accepted). Any other exception counts as a 5xx.
    """
    caught: pytest.ExceptionInfo[Any] = pytest.ExceptionInfo.for_later()
    accepted = crashed = False
    try:
        yield caught
        accepted = True
    except expected:
        caught.fill_unfilled(sys.exc_info())  # type: ignore[arg-type]
    except Exception:
        crashed = True
        raise
    finally:
        failed_open = opened() if opened is not None else accepted
        record(category, 1, failed_open=int(bool(failed_open)), server_errors=int(crashed))
    if accepted:
        pytest.fail(f"DID NOT RAISE {expected}")


def tallies() -> dict[str, Tally]:
    """A copy of every category's totals, in the order they were first recorded."""
    with _LOCK:
        return {name: Tally(**asdict(tally)) for name, tally in _TALLIES.items()}


def failing_rows(found: dict[str, Tally] | None = None) -> list[str]:
    """Each row with a count that must be 0 and is not, in words (empty: the table holds).

    ``found``: the tallies to judge (default: what this run recorded)."""
    rows = found if found is not None else tallies()
    failing = []
    for name, tally in rows.items():
        counts = {"failed open": tally.failed_open, "5xx": tally.server_errors}
        if name not in DOUBLE_RUNS_EXPECTED:
            counts["double runs"] = tally.double_runs
        said = ", ".join(f"{count} {what}" for what, count in counts.items() if count)
        if said:
            failing.append(f"{name}: {said}")
    return failing


def render(found: dict[str, Tally] | None = None) -> list[str]:
    """The table as lines (markdown, so it pastes into a closing note)."""
    rows = found if found is not None else tallies()
    total = Tally()
    lines = [
        "| category | inputs tried | failed open | 5xx | double runs |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, tally in rows.items():
        lines.append(
            f"| {name} | {tally.tried} | {tally.failed_open} | {tally.server_errors} "
            f"| {tally.double_runs} |"
        )
        for field in ("tried", "failed_open", "server_errors", "double_runs"):
            setattr(total, field, getattr(total, field) + getattr(tally, field))
    lines.append(
        f"| **total** | {total.tried} | {total.failed_open} | {total.server_errors} "
        f"| {total.double_runs} |"
    )
    return lines


def write_json(path: Path) -> None:
    """Write the tallies as JSON (for CI artifacts and closing notes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {name: asdict(tally) for name, tally in tallies().items()}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
