"""Open a ledger from the ``--db`` value users pass everywhere: a SQLite path or a Postgres URL."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
