"""libpq's protocol trace of a real connection, and the statements a client sent in it."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.pq import Trace


@contextmanager
def traced(conn: psycopg.Connection[Any]) -> Iterator[list[str]]:
    """The protocol messages (``F``rontend and ``B``ackend lines) sent on ``conn``."""
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace"
        with path.open("w") as sink:
            conn.pgconn.trace(sink.fileno())
            conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
            try:
                yield lines
            finally:
                conn.pgconn.untrace()
        lines.extend(path.read_text().splitlines())


def statements_sent(trace: list[str]) -> list[str]:
    """The statements the client sent: ``Query`` messages, and for each ``Execute`` the
    ``Parse`` (or, for a prepared statement, the ``Bind``) before it, as trace lines."""
    sent, pending = [], ""
    for line in trace:
        direction, _, message, *_ = [*line.split("\t"), "", "", ""]
        if direction != "F":
            continue
        if message == "Query":
            sent.append(line)
        elif message == "Parse" or (message == "Bind" and not pending):
            pending = line
        elif message == "Execute":
            sent.append(pending)
            pending = ""
    return sent
