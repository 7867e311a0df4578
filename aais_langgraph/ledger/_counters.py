"""The two counters of one SQL write transaction: sequences and the audit chain's tip.

Every write that assigns a sequence or appends an audit entry does so through
:class:`Counters`, which reads them (locked, where the backend locks rows) as the
transaction's last lock and writes them back once, on a clean exit. Where the
backend batches (Postgres pipeline mode, see :meth:`SqlBackend._write_batched`) the
lock is held for one client turn: the locking read and the one check that must
follow it come back in one round trip, and everything written after it goes out
with the ``COMMIT`` in one more, so no statement waits on the client while the
lock is held. Postgres goes further when its schema has ``aais_stamp``:
:class:`~._postgres_server_counters.StampedCounters` lets the server fill the counters in,
and the lock is never held across a client turn. Rows that carry counters go
through :meth:`Counters.insert` and :meth:`Counters.insert_event`, and what a write
returns through :meth:`Counters.settled`, for that reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from ._records import next_audit_entry
from ._rows import INSERT_AUDIT, INSERT_EVENT, audit_row
from .records import AuditEntry, JsonDict, dump_json

if TYPE_CHECKING:
    from ._sql import SqlBackend

__all__ = ["Counters", "Cursor", "Probe", "Tip", "sql_for"]

Tip = tuple[int, str] | None
T = TypeVar("T")
Probe = tuple[str, Sequence[Any]]
"""A one-row read (``?`` marks, parameters) to run right after the counters are locked."""


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
    clean exit if they changed. ``probe`` is a read that must see every write
    committed before the lock was granted (a duplicate check); its row is
    :attr:`probed`.
    """

    canonical_rows: ClassVar[bool] = True
    """A request row stores its JSON in RFC 8785 form, the bytes its audit entry's digests
    hash (False where the row's text is a template the server fills in)."""

    def __init__(self, ledger: SqlBackend, cur: Cursor, probe: Probe | None = None) -> None:
        self._ledger = ledger
        self._cur = cur
        self._probe = probe
        self.last_sequence = 0
        self.tip: Tip = None
        self.probed: Any = None
        self._changed = False

    def __enter__(self) -> Counters:
        self.last_sequence, self.tip, self.probed = self._ledger._lock_counters(
            self._cur, self._probe
        )
        return self

    def __exit__(self, exc_type: Any, exc: Any, traceback: Any) -> None:
        if exc_type is None and self._changed:
            self._ledger._write_counters(self._cur, self.last_sequence, self.tip)

    def insert(self, sql: str, params: Sequence[Any]) -> None:
        """Insert a row that carries counters (a sequence, an audit index)."""
        self._ledger._run(self._cur, sql, params)

    def insert_event(self, envelope: JsonDict) -> str:
        """Insert the event of a sequenced envelope (before any row holding the same text);
        returns that text, for the row to store as it is."""
        text = dump_json(envelope)
        self._ledger._run(self._cur, INSERT_EVENT, (envelope["sequence"], text))
        return text

    def settled(self, value: T) -> T:
        """``value`` as committed (a backend that stamps counters at commit fills them in)."""
        return value

    def allocate(self, count: int) -> int:
        """Reserve ``count`` consecutive sequences and return the first."""
        first = self.last_sequence + 1
        self.last_sequence += count
        self._changed = True
        return first

    def append_audit(self, kind: str, payload: Mapping[str, Any]) -> AuditEntry:
        """Append one chained entry after the tip; the new tip is saved on exit."""
        entry = next_audit_entry(self.tip, kind, payload, key=self._ledger.authority_key)
        self._ledger._run(self._cur, INSERT_AUDIT, audit_row(entry))
        self.tip = (entry.index, entry.entry_hash)
        self._changed = True
        return entry
