"""The hostile-input tally: every hostile test records what it tried; the run prints one table.

Any suite may call :func:`record` (races, kill -9, tampering): the table is printed
by ``pytest_terminal_summary`` in ``tests/hostile/conftest.py`` and written to
``artifacts/hostile/report.json``. "Failed open" means a hostile input left an
approval recorded or an action executed; "5xx" counts server errors (and AG-UI
``RUN_ERROR``s with the internal code); "double runs" counts actions that ran
more than once for one approval.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["Tally", "record", "render", "tallies", "write_json"]


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


def tallies() -> dict[str, Tally]:
    """A copy of every category's totals, in the order they were first recorded."""
    with _LOCK:
        return {name: Tally(**asdict(tally)) for name, tally in _TALLIES.items()}


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
