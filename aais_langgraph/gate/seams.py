"""Every private LangGraph detail the gate relies on, in one place (pinned by one test).

``tests/gate/test_langgraph_seams.py`` checks each of them against the installed
LangGraph. A seam LangGraph moved fails here, at import, naming the tested
range, never silently at run time.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

TESTED_RANGE = "langgraph >=1.2,<1.3 (tested with 1.2.24)"

try:
    from langgraph._internal._constants import (
        CONFIG_KEY_RESUME_MAP,
        CONFIG_KEY_SCRATCHPAD,
        INTERRUPT,
    )
    from langgraph.errors import _mark_invalid_resume
    from langgraph.pregel._task_status import read_task_statuses
    from langgraph.types import _interrupt_id
except ImportError as error:  # pragma: no cover - only on an untested langgraph
    raise ImportError(
        f"aais_langgraph.gate relies on private LangGraph details ({error}); "
        f"this langgraph does not have them. Supported: {TESTED_RANGE}."
    ) from error

__all__ = [
    "INTERRUPT_WRITES",
    "RESUME_MAP_KEY",
    "SCRATCHPAD_KEY",
    "TESTED_RANGE",
    "InterruptRow",
    "StoredWrite",
    "ainterrupt_bytes",
    "alatest_interrupt_rows",
    "interrupt_bytes",
    "interrupt_id_for",
    "interrupt_will_pause",
    "latest_interrupt_blobs",
    "latest_interrupt_rows",
    "latest_interrupt_writes",
    "load_write",
    "mark_invalid_resume",
    "open_interrupts",
    "resume_map",
    "saved_answers",
    "scratchpad",
    "task_finished",
    "task_finished_in",
    "task_of_namespace",
]

RESUME_MAP_KEY: str = CONFIG_KEY_RESUME_MAP
"""``configurable`` key holding the current ``Command(resume={id: value})`` map."""

SCRATCHPAD_KEY: str = CONFIG_KEY_SCRATCHPAD
"""``configurable`` key of the per-execution scratchpad of the running task."""

INTERRUPT_WRITES: str = INTERRUPT
"""The name (a LangGraph channel) of interrupt writes in a checkpoint's ``pending_writes``."""


def scratchpad(configurable: Mapping[str, Any]) -> object | None:
    """The running task's scratchpad: one object per execution of the task."""
    found: object | None = configurable.get(SCRATCHPAD_KEY)
    return found


def saved_answers(configurable: Mapping[str, Any]) -> Sequence[Any]:
    """The answers the running task already consumed (its scratchpad's ``resume`` list)."""
    return getattr(scratchpad(configurable), "resume", None) or ()


def interrupt_will_pause(configurable: Mapping[str, Any]) -> bool:
    """True when the running task's next ``interrupt()`` is sure to pause: no answer was
    saved or given for the task and there is no plain resume value. False when it may
    return an answer. Asking changes nothing (the plain value is looked at, not used up)."""
    pad = scratchpad(configurable)
    if pad is None or getattr(pad, "resume", None):
        return False
    null_resume = getattr(pad, "get_null_resume", None)
    return callable(null_resume) and null_resume(False) is None


def resume_map(configurable: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The id-keyed resume map of this run, if it was resumed with one."""
    found = configurable.get(RESUME_MAP_KEY)
    return found if isinstance(found, Mapping) else None


def interrupt_id_for(checkpoint_ns: str, slot: int) -> str:
    """The id LangGraph gives the interrupt filling answer slot ``slot`` of a task."""
    return str(_interrupt_id(checkpoint_ns, slot))


def open_interrupts(pending_writes: Sequence[tuple[str, str, Any]] | None) -> list[Any]:
    """The interrupts of a thread's latest checkpoint still waiting for an answer, as
    ``get_state`` reports them: those of tasks that have not finished (a task answered
    and finished keeps its interrupt write until the step completes). LangGraph's own
    reading of the pending writes."""
    statuses = read_task_statuses(pending_writes or ())
    return [pending for status in statuses.values() for pending in status.pending_interrupts]


def task_of_namespace(checkpoint_ns: str) -> str | None:
    """The id of the root task of a task namespace (``node:task_id|...``): the task of the
    thread's root graph the namespace runs in (None for an empty namespace)."""
    root = checkpoint_ns.split("|", 1)[0]
    if ":" not in root:
        return None
    return root.rsplit(":", 1)[1] or None


def task_finished_in(saved: Any, task_id: str) -> bool | None:
    """Whether task ``task_id`` ran to completion with its writes stored in the checkpoint
    tuple ``saved``, by LangGraph's own reading of its pending writes (a task that recorded
    an error does not count as finished); None when ``saved`` holds no write of the task."""
    status = read_task_statuses(saved.pending_writes or ()).get(task_id)
    if status is None:
        return None
    return status.finished and status.error is None


def task_finished(checkpoints: Iterable[Any], task_id: str) -> bool | None:
    """:func:`task_finished_in` of the newest of a thread's checkpoint tuples (newest
    first) that holds writes of the task; None when none does."""
    for saved in checkpoints:
        found = task_finished_in(saved, task_id)
        if found is not None:
            return found
    return None


def mark_invalid_resume(error: BaseException) -> None:
    """Tell LangGraph ``error`` is a bad resume value, so it keeps the interrupt pending."""
    _mark_invalid_resume(error)


_LATEST_INTERRUPTS = """
SELECT w.thread_id, w.type, w.value FROM writes AS w
JOIN (SELECT thread_id, MAX(checkpoint_id) AS checkpoint_id FROM checkpoints
      WHERE checkpoint_ns = '' GROUP BY thread_id) AS latest
  ON w.thread_id = latest.thread_id AND w.checkpoint_id = latest.checkpoint_id
WHERE w.checkpoint_ns = '' AND w.channel = ?
"""
"""The interrupt writes of every thread's latest root checkpoint, in ``SqliteSaver``'s
tables (checkpoint ids sort by time, as its own ``list`` relies on). Unordered: sorting
10k rows with their values in a temporary B-tree took two thirds of the query."""


StoredWrite = tuple[str, bytes]
"""A checkpoint write as the checkpointer stores it: ``(type, bytes)`` of its serializer."""


def latest_interrupt_writes(checkpointer: Any) -> Iterator[tuple[str, Any]] | None:
    """``(thread_id, value)`` of each interrupt write in every thread's latest root
    checkpoint, in one query; None for a checkpointer without one (use ``list``).

    Only LangGraph's ``SqliteSaver`` (its table layout is the private detail here).
    """
    stored = latest_interrupt_blobs(checkpointer)
    if stored is None:
        return None
    return (
        (thread_id, load_write(checkpointer, (kind, value))) for thread_id, kind, value in stored
    )


def latest_interrupt_blobs(checkpointer: Any) -> list[tuple[str, str, bytes]] | None:
    """:func:`latest_interrupt_writes` still serialized, as ``(thread_id, type, bytes)``
    (:func:`load_write` reads one), so a caller that has seen the same bytes before need
    not deserialize them again."""
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:  # pragma: no cover - the sqlite checkpointer is optional
        return None
    if type(checkpointer) is not SqliteSaver:
        return None
    with checkpointer.cursor(transaction=False) as cur:
        rows: list[tuple[str, str, bytes]] = cur.execute(
            _LATEST_INTERRUPTS, (INTERRUPT,)
        ).fetchall()
    return rows


_LATEST_INTERRUPT_ROWS = """
SELECT w.thread_id, w.checkpoint_id, w.rowid, w.type, length(w.value) FROM writes AS w
JOIN (SELECT thread_id, MAX(checkpoint_id) AS checkpoint_id FROM checkpoints
      WHERE checkpoint_ns = '' GROUP BY thread_id) AS latest
  ON w.thread_id = latest.thread_id AND w.checkpoint_id = latest.checkpoint_id
WHERE w.checkpoint_ns = '' AND w.channel = ?
"""
""":data:`_LATEST_INTERRUPTS` without the values: what identifies each write."""

_ROWS_BYTES = "SELECT rowid, value FROM writes WHERE rowid IN (SELECT value FROM json_each(?))"

_DATA_VERSION = "PRAGMA data_version"
"""Changes when another connection commits to the file; with the connection's own
``total_changes``, what says nothing was written since the last read."""

_COUNTS = "SELECT (SELECT count(*) FROM checkpoints), (SELECT count(*) FROM writes)"
_LAST_CHECKPOINT = (
    "SELECT rowid, thread_id, checkpoint_ns, checkpoint_id FROM checkpoints "
    "ORDER BY rowid DESC LIMIT 1"
)
_LAST_WRITE = (
    "SELECT rowid, thread_id, checkpoint_ns, checkpoint_id, task_id, idx FROM writes "
    "ORDER BY rowid DESC LIMIT 1"
)
_CHECKPOINT_AT = "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE rowid = ?"
_WRITE_AT = (
    "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx FROM writes WHERE rowid = ?"
)
_NEW_CHECKPOINTS = (
    "SELECT thread_id, checkpoint_ns = '' FROM checkpoints WHERE rowid > ? AND rowid <= ?"
)
_NEW_WRITES = (
    "SELECT thread_id, checkpoint_ns = '' AND channel = ? FROM writes "
    "WHERE rowid > ? AND rowid <= ?"
)
_THREADS_INTERRUPT_ROWS = """
SELECT w.thread_id, w.checkpoint_id, w.rowid, w.type, length(w.value) FROM writes AS w
JOIN (SELECT thread_id, MAX(checkpoint_id) AS checkpoint_id FROM checkpoints
      WHERE checkpoint_ns = '' AND thread_id IN (SELECT value FROM json_each(?))
      GROUP BY thread_id) AS latest
  ON w.thread_id = latest.thread_id AND w.checkpoint_id = latest.checkpoint_id
WHERE w.checkpoint_ns = '' AND w.channel = ?
"""
""":data:`_LATEST_INTERRUPT_ROWS` of the threads a JSON array names."""

_CHANGED_AT_MOST = 2_000
"""Threads written to since the last read beyond which every thread is read again in the
one query (cheaper by then than a lookup per thread)."""

_ADDED_AT_MOST = 50_000
"""Rows added to a table since the last read beyond which every thread is read again."""


@dataclass(frozen=True)
class _Tail:
    """Where one of ``SqliteSaver``'s tables ended when last read: its last row id (0 for
    an empty table), that row's key, and how many rows it held."""

    rowid: int
    key: tuple[Any, ...] | None
    count: int


@dataclass(frozen=True)
class _LatestRows:
    """The interrupt rows of every thread's latest root checkpoint, as last read, by
    thread; the file's change marker read before them; and where both tables ended."""

    marker: tuple[int, int]
    checkpoints: _Tail
    writes: _Tail
    by_thread: dict[str, list[InterruptRow]]

    def rows(self) -> list[InterruptRow]:
        return list(self._rows)

    @functools.cached_property
    def _rows(self) -> tuple[InterruptRow, ...]:
        return tuple(row for rows in self.by_thread.values() for row in rows)


_LAST_ROWS: WeakKeyDictionary[Any, _LatestRows] = WeakKeyDictionary()
"""Saver -> the interrupt rows it held when last read (:class:`_LatestRows`)."""

InterruptRow = tuple[str, str, int, str, int]
"""``(thread_id, checkpoint_id, rowid, type, size)`` of a stored interrupt write.

``SqliteSaver`` writes a changed write as a new row (``INSERT OR REPLACE`` deletes the
old one), and checkpoint ids are never reused, so a row id met before in the same
checkpoint, with the same type and size, holds the bytes read then."""

_Query = tuple[str, tuple[Any, ...]]
_Reading = Generator[_Query, list[Any], _LatestRows]


def _read_latest(last: _LatestRows | None, marker: tuple[int, int]) -> _Reading:
    """The queries that bring ``last`` up to date, in one read snapshot (each yields a
    statement and receives its rows): only the threads whose rows can have changed are
    read again.

    Both tables are rowid tables that ``SqliteSaver`` only appends to, except when it
    deletes (a thread deleted or pruned, a write replaced): a new row takes a row id above
    every row there, so the rows past the last row id read are what was added. Any
    deletion shows as a row count other than the last one plus what was added, or as
    another row at the last row id (a deleted last row's id given again); either reads
    every thread again. ``SqliteSaver`` never updates a row in place: a hand edit that
    does (``UPDATE`` on these tables) is seen at the next full read, as a write of
    the same row id, type and size always was.
    """
    counts = (yield _COUNTS, ())[0]
    checkpoints = _tail((yield _LAST_CHECKPOINT, ()), int(counts[0]))
    writes = _tail((yield _LAST_WRITE, ()), int(counts[1]))
    touched: set[str] | None = None
    if last is not None:
        touched = yield from _touched(last, checkpoints, writes)
    if touched is None or len(touched) > _CHANGED_AT_MOST:
        by_thread: dict[str, list[InterruptRow]] = {}
        for row in (yield _LATEST_INTERRUPT_ROWS, (INTERRUPT,)):
            by_thread.setdefault(row[0], []).append(tuple(row))
        return _LatestRows(marker, checkpoints, writes, by_thread)
    assert last is not None  # touched is None when nothing was read before
    by_thread = last.by_thread
    if touched:
        by_thread = {key: rows for key, rows in by_thread.items() if key not in touched}
        threads = json.dumps(sorted(touched))
        for row in (yield _THREADS_INTERRUPT_ROWS, (threads, INTERRUPT)):
            by_thread.setdefault(row[0], []).append(tuple(row))
    return _LatestRows(marker, checkpoints, writes, by_thread)


def _tail(last_row: list[Any], count: int) -> _Tail:
    if not last_row:
        return _Tail(0, None, count)
    rowid, *key = last_row[0]
    return _Tail(int(rowid), tuple(key), count)


def _touched(
    last: _LatestRows, checkpoints: _Tail, writes: _Tail
) -> Generator[_Query, list[Any], set[str] | None]:
    """The threads with a root checkpoint or interrupt write added since ``last``; None
    when a row was deleted since (every thread is to be read again)."""
    touched: set[str] = set()
    for before, now, at, added, extra in (
        (last.checkpoints, checkpoints, _CHECKPOINT_AT, _NEW_CHECKPOINTS, ()),
        (last.writes, writes, _WRITE_AT, _NEW_WRITES, (INTERRUPT,)),
    ):
        if now.rowid < before.rowid or now.rowid - before.rowid > _ADDED_AT_MOST:
            return None
        if before.key is not None and [tuple(row) for row in (yield at, (before.rowid,))] != [
            before.key
        ]:
            return None
        rows = yield added, (*extra, before.rowid, now.rowid)
        if before.count + len(rows) != now.count:
            return None
        touched.update(thread_id for thread_id, relevant in rows if relevant)
    return touched


def _run_sync(cur: Any, reading: _Reading) -> _LatestRows:
    """Run ``reading``'s queries on a ``sqlite3`` cursor."""
    try:
        query = next(reading)
        while True:
            query = reading.send(cur.execute(*query).fetchall())
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def latest_interrupt_rows(checkpointer: Any) -> list[InterruptRow] | None:
    """What identifies each interrupt write in every thread's latest root checkpoint, in
    queries that read no value (:func:`interrupt_bytes` reads those a caller has not
    met); None for a checkpointer other than ``SqliteSaver``. The rows read last are
    handed out again when nothing was written to the file since, and only the threads
    written to since are read again otherwise (:func:`_read_latest`)."""
    saver = _sqlite_saver(checkpointer)
    if saver is None:
        return None
    with saver.cursor(transaction=False) as cur:
        marker = (int(cur.execute(_DATA_VERSION).fetchone()[0]), saver.conn.total_changes)
        last = _LAST_ROWS.get(saver)
        if last is not None and last.marker == marker:
            return last.rows()
        snapshot = not saver.conn.in_transaction
        if snapshot:
            cur.execute("BEGIN")  # one read snapshot for every query
        try:
            latest = _run_sync(cur, _read_latest(last, marker))
        finally:
            if snapshot:
                cur.execute("ROLLBACK")
    _LAST_ROWS[saver] = latest
    return latest.rows()


def interrupt_bytes(checkpointer: Any, rowids: Collection[int]) -> dict[int, bytes]:
    """Row id -> the bytes of each stored write ``rowids`` names that is still there."""
    saver = _sqlite_saver(checkpointer)
    if saver is None or not rowids:
        return {}
    with saver.cursor(transaction=False) as cur:
        found = cur.execute(_ROWS_BYTES, (json.dumps(sorted(rowids)),)).fetchall()
    return {int(rowid): bytes(value) for rowid, value in found}


async def alatest_interrupt_rows(checkpointer: Any) -> list[InterruptRow] | None:
    """:func:`latest_interrupt_rows` for LangGraph's ``AsyncSqliteSaver`` (None for others)."""
    saver = _async_sqlite_saver(checkpointer)
    if saver is None:
        return None
    await saver.setup()
    async with saver.lock:
        async with saver.conn.execute(_DATA_VERSION) as cur:
            version = await cur.fetchone()
        marker = (int(version[0]), saver.conn.total_changes)
        last = _LAST_ROWS.get(saver)
        if last is not None and last.marker == marker:
            return last.rows()
        reading = _read_latest(last, marker)
        snapshot = not saver.conn.in_transaction
        if snapshot:
            await saver.conn.execute("BEGIN")  # one read snapshot for every query
        try:
            query = next(reading)
            while True:
                async with saver.conn.execute(*query) as cur:
                    query = reading.send(list(await cur.fetchall()))
        except StopIteration as done:
            latest: _LatestRows = done.value
        finally:
            if snapshot:
                await saver.conn.execute("ROLLBACK")
    _LAST_ROWS[saver] = latest
    return latest.rows()


async def ainterrupt_bytes(checkpointer: Any, rowids: Collection[int]) -> dict[int, bytes]:
    """:func:`interrupt_bytes` for ``AsyncSqliteSaver``."""
    saver = _async_sqlite_saver(checkpointer)
    if saver is None or not rowids:
        return {}
    params = (json.dumps(sorted(rowids)),)
    async with saver.lock, saver.conn.execute(_ROWS_BYTES, params) as cur:
        found = await cur.fetchall()
    return {int(rowid): bytes(value) for rowid, value in found}


def _async_sqlite_saver(checkpointer: Any) -> Any | None:
    try:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    except ImportError:  # pragma: no cover - the sqlite checkpointer is optional
        return None
    return checkpointer if type(checkpointer) is AsyncSqliteSaver else None


def _sqlite_saver(checkpointer: Any) -> Any | None:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:  # pragma: no cover - the sqlite checkpointer is optional
        return None
    return checkpointer if type(checkpointer) is SqliteSaver else None


def load_write(checkpointer: Any, write: StoredWrite) -> Any:
    """The value of a stored write, deserialized by the checkpointer's serializer."""
    return checkpointer.serde.loads_typed(write)
