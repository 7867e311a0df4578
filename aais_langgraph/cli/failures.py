"""One line and an exit status for each way opening or reading a ledger can fail.

Shared by the CLI commands and the stdio presenter, so both name the same failures
the same way: no traceback, never a stored value.
"""

from __future__ import annotations

import sqlite3
from typing import TextIO

from ..authority import LedgerIntegrityError
from ..ledger import NotALedgerError
from ..protocol import AAISValidationError

__all__ = ["report_failure"]


def report_failure(error: BaseException, out: TextIO) -> int | None:
    """Write the one-line error for ``error`` to ``out`` and return the exit status
    (1: the ledger failed its integrity check; 2: bad input or no usable ledger),
    or None for an error that is not a ledger failure (the caller re-raises it)."""
    if isinstance(error, LedgerIntegrityError):
        out.write(f"error: {error}\n")
        return 1
    if isinstance(error, (AAISValidationError, NotALedgerError)):
        out.write(f"error: {error}\n")
        return 2
    if isinstance(error, ImportError):
        out.write(f"error: {error.name} is not installed (see the sqlite and postgres extras)\n")
        return 2
    if isinstance(error, sqlite3.DatabaseError):
        out.write(f"error: db: the ledger file is damaged or unreadable ({error})\n")
        return 2
    if isinstance(error, _database_errors()):
        out.write(f"error: db: the ledger database failed ({type(error).__name__})\n")
        return 2
    return None


def _database_errors() -> tuple[type[Exception], ...]:
    """Postgres driver errors, when the ``postgres`` extra is installed."""
    try:
        import psycopg
    except ImportError:
        return ()
    return (psycopg.Error,)
