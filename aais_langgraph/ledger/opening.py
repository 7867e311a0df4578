"""Open a ledger from the ``--db`` value users pass everywhere: a SQLite path or a Postgres URL."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .base import Ledger, NotALedgerError
from .deliveries import DeliveryPlan
from .sqlite import SqliteLedger

POSTGRES_SCHEMES = ("postgres://", "postgresql://")


def _check_existing(ledger: Ledger) -> None:
    """Refuse a target without the ledger's tables, before anything writes to it."""
    try:
        present = ledger.is_set_up()
    except sqlite3.DatabaseError as error:
        raise NotALedgerError(f"db: not a SQLite database ({error})") from None
    if not present:
        raise NotALedgerError(
            "db: holds no aais ledger (an empty file or another application's database)"
        )


def is_postgres_url(target: str) -> bool:
    """True for a ``postgres://`` or ``postgresql://`` URL."""
    return target.startswith(POSTGRES_SCHEMES)


@contextmanager
def open_ledger(
    target: str,
    *,
    setup: bool = True,
    create: bool = True,
    delivery_plan: DeliveryPlan | None = None,
) -> Iterator[Ledger]:
    """A ledger for ``target`` (SQLite file path or Postgres URL), closed on exit.

    The schema is created when missing unless
    ``setup=False``, which also turns off the SQLite ledger's setup on first use.
    With ``create=False`` the target must already hold a ledger, checked before
    anything writes to it: a missing file, an empty one, another application's
    database or an unreadable one raises :class:`NotALedgerError` and is left
    untouched. Postgres needs the ``postgres`` extra.

    Args:
        target: A SQLite file path or a ``postgres://`` / ``postgresql://`` URL.
        setup: Create the schema when missing (SQLite: also on first use).
        create: Whether a target without a ledger may become one.
        delivery_plan: The webhook deliveries the ledger's writes record (None: none).
    """
    if not target:
        raise ValueError("db: expected a SQLite file path or a postgresql:// URL")
    if is_postgres_url(target):
        from .postgres import PostgresLedger

        with PostgresLedger.from_conn_string(
            target, pool_size=4, delivery_plan=delivery_plan
        ) as ledger:
            if not create:
                _check_existing(ledger)
            if setup:
                ledger.setup()
            yield ledger
        return
    if not create and not Path(target).is_file():
        raise NotALedgerError("db: no ledger file at this path (create one with the init command)")
    try:
        ledger_file = SqliteLedger(target, auto_setup=setup, delivery_plan=delivery_plan)
    except sqlite3.DatabaseError as error:
        raise NotALedgerError(f"db: not a SQLite database ({error})") from None
    try:
        if not create:
            _check_existing(ledger_file)
        if setup:
            ledger_file.setup()
        yield ledger_file
    finally:
        ledger_file.close()


def ledger_location(ledger: Ledger) -> str | None:
    """Where ``ledger`` keeps its facts, to say and to compare, never with a secret: a
    SQLite file's absolute path, ``postgresql://user@host:port/dbname`` (no password),
    or a ledger in this process's memory (named with its object id, so two never
    compare equal); None for a ledger of another kind, which cannot tell."""
    from .memory import InMemoryLedger

    if isinstance(ledger, InMemoryLedger):
        return f"an in-memory ledger (0x{id(ledger):x})"
    if isinstance(ledger, SqliteLedger):
        return _sqlite_location(ledger)
    if _is_postgres_ledger(ledger):
        return _postgres_location(ledger)
    return None


def same_ledger(first: Ledger, second: Ledger) -> bool:
    """False only when both ledgers say where they are and the places surely differ: two
    in-memory ledgers, two SQLite files, SQLite and PostgreSQL, or PostgreSQL databases of
    different names (the same name is taken as the same database: a host or port may be
    spelled two ways, and a working deployment must never be refused)."""
    if first is second:
        return True
    here, there = ledger_location(first), ledger_location(second)
    if here is None or there is None:
        return True
    if here.startswith("postgresql://") and there.startswith("postgresql://"):
        names = here.rpartition("/")[2], there.rpartition("/")[2]
        return not all(names) or names[0] == names[1]  # a name from PGDATABASE is unknown
    return here == there


def _is_postgres_ledger(ledger: Ledger) -> bool:
    """True for a :class:`~.postgres.PostgresLedger` (without importing psycopg)."""
    return any(
        cls.__name__ == "PostgresLedger" and cls.__module__.endswith(".ledger.postgres")
        for cls in type(ledger).__mro__
    )


def _sqlite_location(ledger: SqliteLedger) -> str | None:
    try:
        with ledger._lock:
            rows = ledger._conn.execute("PRAGMA database_list").fetchall()
    except sqlite3.Error:
        return None  # closed
    path = next((str(row[2]) for row in rows if row[1] == "main"), "")
    if not path:
        return f"a SQLite database in memory (0x{id(ledger._conn):x})"
    return str(Path(path).resolve())


def _postgres_location(ledger: Ledger) -> str | None:
    from psycopg.conninfo import conninfo_to_dict

    pool = getattr(ledger, "_pool", None)
    conn = getattr(ledger, "_conn", None)
    if pool is not None:
        params: dict[str, Any] = dict(conninfo_to_dict(pool.conninfo))
    elif conn is not None:
        params = dict(conn.info.get_parameters())
    else:
        return None
    user = f"{params['user']}@" if params.get("user") else ""
    host = params.get("host") or "localhost"
    port = f":{params['port']}" if params.get("port") else ""
    return f"postgresql://{user}{host}{port}/{params.get('dbname', '')}"
