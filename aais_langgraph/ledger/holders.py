"""Who holds a run lease or an execution claim: a name that says where the holder runs.

A holder's name records its host, boot id, PID and the PID's start time, so any
process on the same host can tell that the holder is gone (or that its PID now
belongs to a process started later) and need not wait for its lease or claim to
expire. A holder on another host, or a name without an origin, is presumed alive.
"""

from __future__ import annotations

import functools
import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HolderOrigin", "holder_is_dead", "holder_origin", "new_holder"]


@dataclass(frozen=True)
class HolderOrigin:
    """Where a lease holder runs: host name, boot id, PID and the PID's start time."""

    host: str
    boot: str
    pid: int
    started: str

    def label(self) -> str:
        """``pid@host``, what listings show."""
        return f"{self.pid}@{self.host}"


@functools.lru_cache(maxsize=1)
def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("/", "-")
    except OSError:
        return "-"


def _process_start(pid: int) -> str | None:
    """The PID's start time in clock ticks since boot (``/proc``), None if it is gone or a
    zombie, ``"-"`` where ``/proc`` cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return "-"
    fields = stat[stat.rfind(")") + 2 :].split()
    if not fields or fields[0] in ("Z", "X"):
        return None
    return fields[19] if len(fields) > 19 else "-"


_ORIGINS: dict[int, str] = {}


def _this_origin() -> str:
    pid = os.getpid()  # a forked child gets its own
    origin = _ORIGINS.get(pid)
    if origin is None:
        host = socket.gethostname().replace("/", "-").replace("@", "-")
        origin = f"{host}/{_boot_id()}/{pid}/{_process_start(pid) or '-'}"
        _ORIGINS[pid] = origin
    return origin


def new_holder() -> str:
    """A unique lease-holder name for one resume, naming where it runs (:func:`holder_origin`)."""
    return f"holder_{uuid.uuid4().hex}@{_this_origin()}"


def holder_origin(holder: str) -> HolderOrigin | None:
    """Where the holder named ``holder`` runs (None for a name without an origin)."""
    _, at, origin = holder.partition("@")
    parts = origin.split("/")
    if not at or len(parts) != 4 or not parts[2].isdigit():
        return None
    return HolderOrigin(parts[0], parts[1], int(parts[2]), parts[3])


def holder_is_dead(holder: str) -> bool:
    """True only when ``holder`` ran on this host since its last boot and its process is
    gone (or its PID now belongs to a process started later). Anything else, another
    host included, is presumed alive: its lease expires by itself."""
    origin = holder_origin(holder)
    if origin is None or origin.boot == "-" or origin.started == "-":
        return False
    host = socket.gethostname().replace("/", "-").replace("@", "-")
    if origin.host != host or origin.boot != _boot_id():
        return False
    if origin.pid == os.getpid():
        return False  # this process is alive; its own leases are released as they end
    started = _process_start(origin.pid)
    return started is None or (started != "-" and started != origin.started)
