"""The two counters of one SQL write transaction: sequences and the audit chain's tip.

Every write that assigns a sequence or appends an audit entry does so through
:class:`Counters`, which reads them (locked, where the backend locks rows) as the
transaction's last lock and writes them back once, on a clean exit. The
statements between are sent as one batch where the backend can (Postgres
pipeline mode): the lock is held for one round trip, not one per statement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from ._records import next_audit_entry
from ._rows import INSERT_AUDIT, audit_row
from .base import AuditEntry

if TYPE_CHECKING:
    from ._sql import SqlLedger

__all__ = ["Counters", "Cursor", "Tip", "sql_for"]

Tip = tuple[int, str] | None


class Cursor(Protocol):
    """What the shared code needs of a DB-API cursor (``sqlite3`` and psycopg both fit)."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


@lru_cache(maxsize=256)
def sql_for(sql: str, mark: str) -> str:
    """``sql`` with its ``?`` marks written as the backend's placeholder."""
    return sql if mark == "?" else sql.replace("?", mark)


class Counters:
    """The counters inside one write transaction: allocates sequences, chains audit entries.

    Read (and locked, where the backend locks rows) on entry, always the last lock a
    transaction takes, which keeps the lock order free of cycles; written back on a
    clean exit if they changed.
    """

    def __init__(self, ledger: SqlLedger, cur: Cursor) -> None:
        self._ledger = ledger
        self._cur = cur
        self.last_sequence = 0
        self.tip: Tip = None
        self._changed = False
        self._batch: AbstractContextManager[object] = nullcontext()

    def __enter__(self) -> Counters:
        self.last_sequence, self.tip = self._ledger._read_counters(self._cur, lock=True)
        self._batch = self._ledger._batch(self._cur)
        self._batch.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        try:
            if exc_type is None and self._changed:
                self._ledger._write_counters(self._cur, self.last_sequence, self.tip)
        except BaseException as error:
            self._batch.__exit__(type(error), error, error.__traceback__)
            raise
        self._batch.__exit__(exc_type, exc, traceback)

    def allocate(self, count: int) -> int:
        """Reserve ``count`` consecutive sequences and return the first."""
        first = self.last_sequence + 1
        self.last_sequence += count
        self._changed = True
        return first

    def append_audit(self, kind: str, payload: Mapping[str, Any]) -> AuditEntry:
        """Append one chained entry after the tip; the new tip is saved on exit."""
        entry = next_audit_entry(self.tip, kind, payload)
        self._ledger._run(self._cur, INSERT_AUDIT, audit_row(entry))
        self.tip = (entry.index, entry.entry_hash)
        self._changed = True
        return entry
