"""What a SQL ledger backend supplies, and how the shared statements run on it.

:class:`SqlBackend` is the seam between :class:`~._sql.SqlLedger` (every statement of
the ledger contract, written once) and a backend (SQLite, Postgres): its connection
handling (a write transaction, a one-statement read, a consistent snapshot), its
placeholder and row locks, and how it stores the two counters.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from ._counters import Counters, Cursor, Probe, Tip, sql_for
from .base import Ledger

__all__ = ["SqlBackend"]


class SqlBackend(Ledger):
    """Connections, marks and counters of one SQL backend; statements run through
    :meth:`_run` with ``?`` marks, written as the backend's :attr:`mark`."""

    mark: ClassVar[str] = "?"
    """The backend's parameter placeholder (``?`` or ``%s``)."""
    for_update: ClassVar[str] = ""
    """Appended to a read that must lock the row it returns (`` FOR UPDATE`` or nothing)."""

    # -- what a backend supplies ---------------------------------------------------

    @abstractmethod
    def _write(self, *, durable: bool = True) -> AbstractContextManager[Cursor]:
        """One write transaction, committed on a clean exit and rolled back on error;
        ``durable=False`` (leases, which expire anyway, and execution marks) may skip
        the disk sync."""

    @abstractmethod
    def _read(self) -> AbstractContextManager[Cursor]:
        """A cursor for single statements, each consistent on its own."""

    @abstractmethod
    def _snapshot(self) -> AbstractContextManager[Cursor]:
        """A read-only transaction that sees one consistent state of every table."""

    @abstractmethod
    def _read_counters(self, cur: Cursor, *, lock: bool) -> tuple[int, Tip]:
        """``(last_sequence, audit_tip)``, locked until commit when ``lock``."""

    @abstractmethod
    def _write_counters(self, cur: Cursor, last_sequence: int, tip: Tip) -> None:
        """Store both counters (inside the transaction that read them locked)."""

    def _write_batched(self) -> AbstractContextManager[Cursor]:
        """A durable write transaction whose statements the backend may send together
        (a fetch waits for what is queued before it) with the ``COMMIT`` after the last
        one; errors surface by its end. The writes that lock the counters use it."""
        return self._write()

    def _counters(self, cur: Cursor, probe: Probe | None = None) -> Counters:
        """The counters of one write transaction (a backend may stamp them at commit)."""
        return Counters(self, cur, probe)

    def _lock_counters(self, cur: Cursor, probe: Probe | None) -> tuple[int, Tip, Any]:
        """``(last_sequence, audit_tip, probe_row)``: the counters locked until commit,
        then ``probe`` run after the lock is granted (a backend may send both at once)."""
        last_sequence, tip = self._read_counters(cur, lock=True)
        return last_sequence, tip, None if probe is None else self._one(cur, *probe)

    def _lock_execution(self, cur: Cursor, request_id: str) -> None:
        """Serialize writers of one execution record that may not exist yet."""

    # -- statements ------------------------------------------------------------------

    def _run(self, cur: Cursor, sql: str, params: Sequence[Any] = ()) -> Cursor:
        cur.execute(sql_for(sql, self.mark), params)
        return cur

    def _one(self, cur: Cursor, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._run(cur, sql, params).fetchone()

    def _all(self, cur: Cursor, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._run(cur, sql, params).fetchall()
