"""CPU seconds of processes, read from ``/proc`` (Linux): one process, or a Postgres server."""

from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def _fields(pid: int) -> list[str]:
    """``/proc/<pid>/stat`` from the state field on (the name may hold spaces)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one live process (all its threads)."""
    fields = _fields(pid)
    return (int(fields[11]) + int(fields[12])) / _TICK


def server_cpu_seconds(data_dir: Path) -> float:
    """CPU seconds used so far by every process of the PostgreSQL server on ``data_dir``.

    The postmaster's own time, the time of the children it has reaped (``cutime`` +
    ``cstime``: backends that have exited), and the time of every live child
    (backends, checkpointer, WAL writer, autovacuum). A backend that exits moves its
    time from the third term to the second, so the sum only grows.
    """
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    fields = _fields(postmaster)
    total = sum(int(fields[i]) for i in (11, 12, 13, 14))
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            child = _fields(int(entry.name))
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue  # gone meanwhile, or not a process
        if int(child[1]) == postmaster:
            total += int(child[11]) + int(child[12])
    return total / _TICK
